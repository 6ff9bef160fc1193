package access

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The credentials file, version 1 (JSON, mode 0600):
//
//	{"version": 1, "principals": [
//	  {"name": "billing",
//	   "salt": "<base64 of 16 random bytes>",
//	   "secret_hash": "<base64 of HMAC-SHA256(key: salt, message: secret)>",
//	   "allow": ["send:orders", "receive:orders/billing"]}]}
//
// The secret itself is never written: see the package doc for how it is
// derived from the key file, and why. Unknown fields are refused, so that
// a misspelt "allow" is an error, not a principal without rules.
//
// The key file holds 32 random bytes in base64 and a newline (mode 0600).
const fileVersion = 1

// File is the content of a credentials file.
type File struct {
	Version    int         `json:"version"`
	Principals []FileEntry `json:"principals"`
}

// FileEntry is one principal of a credentials file.
type FileEntry struct {
	Name       string   `json:"name"`
	Salt       string   `json:"salt"`
	SecretHash string   `json:"secret_hash"`
	Allow      []string `json:"allow"`
}

// entry is a checked FileEntry.
type entry struct {
	principal *Principal
	salt      []byte
	hash      []byte
}

// ParseFile reads and checks the bytes of a credentials file.
func ParseFile(data []byte) (*File, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a credentials file: %w", err)
	}
	if f.Version != fileVersion {
		return nil, fmt.Errorf("credentials file version %d is not %d", f.Version, fileVersion)
	}
	if _, err := f.entries(); err != nil {
		return nil, err
	}
	return &f, nil
}

// entries checks every principal and returns them by name.
func (f *File) entries() (map[string]*entry, error) {
	out := make(map[string]*entry, len(f.Principals))
	for i, e := range f.Principals {
		if err := ValidateName(e.Name); err != nil {
			return nil, fmt.Errorf("principal %d: %w", i+1, err)
		}
		if out[e.Name] != nil {
			return nil, fmt.Errorf("principal %q is listed twice", e.Name)
		}
		salt, err1 := base64.StdEncoding.DecodeString(e.Salt)
		hash, err2 := base64.StdEncoding.DecodeString(e.SecretHash)
		if err1 != nil || err2 != nil || len(salt) != saltSize || len(hash) != sha256.Size {
			return nil, fmt.Errorf("principal %q: salt or secret_hash is not what hourglass principal add writes (base64 of %d and %d bytes)", e.Name, saltSize, sha256.Size)
		}
		rules := make([]Rule, 0, len(e.Allow))
		for _, s := range e.Allow {
			r, err := ParseRule(s)
			if err != nil {
				return nil, fmt.Errorf("principal %q: %w", e.Name, err)
			}
			rules = append(rules, r)
		}
		out[e.Name] = &entry{principal: NewPrincipal(e.Name, rules), salt: salt, hash: hash}
	}
	return out, nil
}

// ValidateName checks a principal's name: 1 to 128 bytes of letters,
// digits, '-', '_', '.' and '@' (a certificate's common name, an access
// key), and not a name the token principals use.
func ValidateName(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("principal name %q must be 1 to 128 bytes", name)
	}
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.@", c)
		if !ok {
			return fmt.Errorf("principal name %q: only letters, digits, '-', '_', '.' and '@' are allowed", name)
		}
	}
	switch name {
	case TokenName, MetricsName, AnonymousName:
		return fmt.Errorf("principal name %q is reserved", name)
	}
	return nil
}

const (
	saltSize = 16
	keySize  = 32
)

// hashSecret is the stored form of a secret: HMAC-SHA256 keyed by the
// principal's salt. Secrets are 256 random bits, so a fast keyed hash
// resists search as well as a slow one would, and checking a bearer
// secret costs microseconds, not the milliseconds a password hash spends
// on every request.
func hashSecret(salt []byte, secret string) []byte {
	m := hmac.New(sha256.New, salt)
	m.Write([]byte(secret))
	return m.Sum(nil)
}

// deriveSecret is a principal's secret: HMAC-SHA256 of its name and salt
// keyed by the key file's key, in unpadded base64url (43 characters, no
// ':' so that "name:secret" splits once).
func deriveSecret(key []byte, name string, salt []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("hourglass secret v1\x00"))
	m.Write([]byte(name))
	m.Write([]byte{0})
	m.Write(salt)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// ReadKey reads a key file.
func ReadKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(key) != keySize {
		return nil, fmt.Errorf("key file %s is not the base64 of %d bytes", path, keySize)
	}
	return key, nil
}

// LoadOrCreateKey reads the key file at path, or makes one (mode 0600)
// if it does not exist.
func LoadOrCreateKey(path string) ([]byte, error) {
	key, err := ReadKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	key = make([]byte, keySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := WriteFileAtomic(path, []byte(base64.StdEncoding.EncodeToString(key)+"\n")); err != nil {
		return nil, fmt.Errorf("write key file: %w", err)
	}
	return key, nil
}

// DefaultKeyFile is the key file of a credentials file when none is
// named: beside it, with ".key" appended.
func DefaultKeyFile(credentials string) string { return credentials + ".key" }

// AddPrincipal adds a principal with rules to f, derives its secret from
// key and returns the secret: the only time it exists outside the
// broker's memory. f is changed only on success.
func (f *File) AddPrincipal(key []byte, name string, rules []Rule) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	for _, e := range f.Principals {
		if e.Name == name {
			return "", fmt.Errorf("principal %q exists already; remove it first to give it a new secret", name)
		}
	}
	salt := make([]byte, saltSize)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	secret := deriveSecret(key, name, salt)
	allow := make([]string, len(rules))
	for i, r := range rules {
		allow[i] = r.String()
	}
	f.Principals = append(f.Principals, FileEntry{Name: name, Salt: base64.StdEncoding.EncodeToString(salt),
		SecretHash: base64.StdEncoding.EncodeToString(hashSecret(salt, secret)), Allow: allow})
	return secret, nil
}

// RemovePrincipal removes a principal from f and reports whether it was
// there.
func (f *File) RemovePrincipal(name string) bool {
	for i, e := range f.Principals {
		if e.Name == name {
			f.Principals = append(f.Principals[:i], f.Principals[i+1:]...)
			return true
		}
	}
	return false
}

// ReadFile reads the credentials file at path; a missing file is an
// empty one.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &File{Version: fileVersion}, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseFile(data)
}

// Write replaces the credentials file at path with f, atomically.
func (f *File) Write(path string) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, append(data, '\n'))
}

// WriteFileAtomic replaces path with data (mode 0600) through a synced
// temporary file, a rename and a sync of the directory, so that a reader
// (the broker's reload) sees the old file or the new one, never a part.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
