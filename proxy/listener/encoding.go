package listener

import (
	"fmt"
	"strings"
)

// CheckBodyEncoding returns an error when a request body sent with the
// Content-Encoding header values given (every field line, or Envoy's
// comma-joined value) is not decided on: a coding other than identity means
// the server may inflate other bytes than the ones Warden read (Node's
// body-parser inflates gzip, deflate and br). The HTTP adapters refuse such
// a request 415, with the error's text.
func CheckBodyEncoding(values ...string) error {
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return fmt.Errorf("a request body with Content-Encoding %s is not decided on (send it uncompressed)", strings.TrimSpace(strings.Join(values, ", ")))
			}
		}
	}
	return nil
}
