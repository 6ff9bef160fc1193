package remoting

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"sort"
)

// The fields RocketMQ's AclClientRPCHook adds to every request.
const (
	aclAccessKey     = "AccessKey"
	aclSignature     = "Signature"
	aclSecurityToken = "SecurityToken"
)

// authorize checks a request's ACL signature when a secret is set: the
// base64 HMAC-SHA1, keyed by the secret, of every extFields value but the
// signature's, in the order of their names, then the body. Any access key
// is accepted with this secret. The Go client leaves a security token out
// of what it signs, the Java client does not: both are accepted.
func (s *Server) authorize(req *Command) error {
	if s.opts.AccessSecret == "" {
		return nil
	}
	sig, ok := req.ExtFields[aclSignature]
	if !ok || req.ExtFields[aclAccessKey] == "" {
		return errors.New("this broker requires ACL credentials: sign requests with an AclClientRPCHook (access key and secret key)")
	}
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return errors.New("the request's signature is not base64")
	}
	for _, withToken := range []bool{true, false} {
		if hmac.Equal(got, s.sign(req, withToken)) {
			return nil
		}
	}
	return errors.New("the request's signature does not verify with this broker's secret key")
}

func (s *Server) sign(req *Command, withToken bool) []byte {
	names := make([]string, 0, len(req.ExtFields))
	for k := range req.ExtFields {
		if k == aclSignature || (k == aclSecurityToken && !withToken) {
			continue
		}
		names = append(names, k)
	}
	sort.Strings(names)
	mac := hmac.New(sha1.New, []byte(s.opts.AccessSecret))
	for _, k := range names {
		mac.Write([]byte(req.ExtFields[k]))
	}
	mac.Write(req.Body)
	return mac.Sum(nil)
}
