package oci_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/persephone-go/psp/examples/classifiers"
	"github.com/persephone-go/psp/internal/registrytest"
	"github.com/persephone-go/psp/oci"
)

// TestCredentials: against a registry that wants a password, publishing
// and pulling work with credentials from each place the Docker
// configuration keeps them (an auths entry, a credential helper, the
// file $DOCKER_CONFIG names), and fail without them or with a wrong
// password, saying where credentials come from.
func TestCredentials(t *testing.T) {
	reg := registrytest.StartWithPassword(t)
	wasm := classifiers.PSPHeader
	dir := t.TempDir()
	config := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name, "config.json")
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	auths := func(user, password string) string {
		return `{"auths":{"` + reg.Addr + `":{"auth":"` + base64.StdEncoding.EncodeToString([]byte(user+":"+password)) + `"}}}`
	}
	// A credential helper, as docker-credential-pass or -ecr-login are:
	// "get" reads the server on stdin and prints the secret.
	bin := filepath.Join(dir, "bin")
	os.MkdirAll(bin, 0o700)
	helper := "#!/bin/sh\n[ \"$1\" = get ] || exit 1\nread server\n" +
		`printf '{"ServerURL":"%s","Username":"` + registrytest.User + `","Secret":"` + registrytest.Password + `"}' "$server"` + "\n"
	if err := os.WriteFile(filepath.Join(bin, "docker-credential-psptest"), []byte(helper), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("DOCKER_CONFIG", filepath.Dir(config("env", auths(registrytest.User, registrytest.Password))))

	ctx := context.Background()
	ref, err := oci.ParseRef("oci://" + reg.Addr + "/psp/private:v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dockerConfig string
		ok                 bool
	}{
		{"auths", config("auths", auths(registrytest.User, registrytest.Password)), true},
		{"credential helper", config("helper", `{"credHelpers":{"`+reg.Addr+`":"psptest"}}`), true},
		{"$DOCKER_CONFIG", "", true},
		{"none", config("none", `{}`), false},
		{"wrong password", config("wrong", auths(registrytest.User, "not-the-password")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &oci.Client{DockerConfig: tc.dockerConfig}
			pinned, perr := c.Publish(ctx, wasm, ref)
			m, err := c.Pull(ctx, ref)
			if tc.ok {
				if perr != nil || err != nil || !bytes.Equal(m.Wasm, wasm) || m.Ref.Digest != pinned.Digest {
					t.Fatalf("publish: %v; pull: %v (%d bytes, pinned %s, published %s)", perr, err, len(m.Wasm), m.Ref, pinned)
				}
				return
			}
			for what, err := range map[string]error{"publish": perr, "pull": err} {
				if err == nil || !strings.Contains(err.Error(), "credentials for "+reg.Addr) || strings.Contains(err.Error(), "is the registry running") {
					t.Errorf("%s without the right credentials: %v, want an error that says where credentials come from", what, err)
				}
			}
		})
	}
}
