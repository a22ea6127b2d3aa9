package psp

import "testing"

func TestRegister(t *testing.T) {
	saved := registered
	t.Cleanup(func() { registered = saved })

	Register(func(p []byte, _ uint32) uint32 { return uint32(len(p)) % 3 }, "UNKNOWN", "", "LONG")
	if registered.numTypes != 3 {
		t.Errorf("numTypes = %d, want 3", registered.numTypes)
	}
	if want := "UNKNOWN\n\nLONG"; registered.typeNames != want {
		t.Errorf("typeNames = %q, want %q", registered.typeNames, want)
	}
	if got := registered.classify([]byte("abcd"), 4); got != 1 {
		t.Errorf("classify = %d, want 1", got)
	}
}

func TestRegisterRejects(t *testing.T) {
	saved := registered
	t.Cleanup(func() { registered = saved })
	fn := func([]byte, uint32) uint32 { return 0 }
	for name, call := range map[string]func(){
		"nil classifier": func() { Register(nil, "UNKNOWN") },
		"no names":       func() { Register(fn) },
		"too many names": func() { Register(fn, make([]string, MaxTypes+1)...) },
		"newline":        func() { Register(fn, "UNKNOWN", "A\nB") },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("Register did not panic")
				}
			}()
			call()
		})
	}
	if registered.numTypes != saved.numTypes {
		t.Error("a rejected Register changed the registry")
	}
}
