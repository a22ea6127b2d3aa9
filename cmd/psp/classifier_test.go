package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// runClassifier runs `psp classifier ARGS...` and returns stdout+stderr.
func runClassifier(t *testing.T, args ...string) (string, error) {
	t.Helper()
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	err := app.Run(append([]string{"psp", "classifier"}, args...))
	return out.String(), err
}

const classifierFixtures = "../../wasmclass/testdata/"

func TestClassifierCheck(t *testing.T) {
	out, err := runClassifier(t, "check", classifierFixtures+"const1.wasm")
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	for _, want := range []string{"const1.wasm: ok", "ABI version:  1", "types:        N = 3", "      1  one", "      2  two", "metered", "imports:      none"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = runClassifier(t, "check", classifierFixtures+"badsig.wasm")
	if err == nil || !strings.Contains(err.Error(), `export "psp_classify_batch" has type (i32,i32)->i32, want (i32)->i32`) {
		t.Errorf("check badsig: err = %v\n%s", err, out)
	}
	if _, err = runClassifier(t, "check", "--memory-pages", "200", classifierFixtures+"bigmem.wasm"); err != nil {
		t.Errorf("check bigmem with a 200-page limit: %v", err)
	}
	if _, err = runClassifier(t, "check"); err == nil || !strings.Contains(err.Error(), "missing FILE.wasm") {
		t.Errorf("check without file: err = %v", err)
	}
}

func TestClassifierTest(t *testing.T) {
	dir := t.TempDir()
	hexFile := filepath.Join(dir, "p.hex")
	if err := os.WriteFile(hexFile, []byte("# first byte is the type\n01 ff\n\n03\n07\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Flags after the file, as users write them.
	out, err := runClassifier(t, "test", classifierFixtures+"good.wasm", "--input", hexFile)
	if err != nil {
		t.Fatalf("test: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var got [][]string
	for _, l := range lines[1:] {
		got = append(got, strings.Fields(l)[:3])
	}
	want := [][]string{{"0", "1", "type1"}, {"1", "3", "type3"}, {"2", "0", "UNKNOWN"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows = %v, want %v\n%s", got, want, out)
	}
	// Faults are reported.
	out, err = runClassifier(t, "test", "-i", hexFile, classifierFixtures+"trap.wasm")
	if err != nil || !strings.Contains(out, "faults: trap 3") {
		t.Errorf("trap: err = %v, want a fault line:\n%s", err, out)
	}
	if _, err = runClassifier(t, "test", classifierFixtures+"good.wasm"); err == nil || !strings.Contains(err.Error(), "missing --input") {
		t.Errorf("no input: err = %v", err)
	}
	if _, err = runClassifier(t, "test", classifierFixtures+"good.wasm", "--input", hexFile, "--format", "yaml"); err == nil {
		t.Error("bad format accepted")
	}
}

func TestClassifierBench(t *testing.T) {
	out, err := runClassifier(t, "bench", classifierFixtures+"good.wasm", "--duration", "20ms")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	if !strings.Contains(out, "single:") || !strings.Contains(out, "batch of 32:") || strings.Count(out, "ns/packet") != 2 {
		t.Errorf("output:\n%s", out)
	}
}

func TestParsePayloads(t *testing.T) {
	got, err := parsePayloads(strings.NewReader("# comment\n0a 0B\n\nff\n"), "hex")
	if err != nil || !reflect.DeepEqual(got, [][]byte{{0x0a, 0x0b}, {0xff}}) {
		t.Errorf("hex: %q, %v", got, err)
	}
	got, err = parsePayloads(strings.NewReader(`GET key\r\n`+"\n"+`say "hi"\x00`+"\n"+`a\"b`+"\n"), "text")
	want := [][]byte{[]byte("GET key\r\n"), []byte("say \"hi\"\x00"), []byte(`a"b`)}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("text: %q, %v; want %q", got, err, want)
	}
	if _, err = parsePayloads(strings.NewReader("00\nzz\n"), "hex"); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad hex: err = %v, want it to name line 2", err)
	}
}

// TestClassifierFlagBounds: a negative bench duration and a module size
// beyond what psp serve accepts (1 GiB) are refused.
func TestClassifierFlagBounds(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--duration", "-1s"}, "--duration -1s: want > 0"},
		{[]string{"bench", "--duration", "2h"}, "--duration 2h0m0s: want > 0 and at most 1h0m0s"},
		{[]string{"check", "--max-size", "9223372036854775807"}, "--max-size 9223372036854775807: want at most 1073741824"},
		{[]string{"check", "--max-size", "1073741825"}, "want at most 1073741824"},
		{[]string{"check", "--max-size", "-5"}, "--max-size -5"},
	} {
		out, err := runClassifier(t, append(tc.args, classifierFixtures+"good.wasm")...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q\n%s", tc.args, err, tc.want, out)
		}
	}
	if out, err := runClassifier(t, "check", "--max-size", "1073741824", classifierFixtures+"good.wasm"); err != nil {
		t.Errorf("--max-size 1 GiB: %v\n%s", err, out)
	}
}
