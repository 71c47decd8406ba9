package listener

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestUpstreamClientHTTP1: the upstream client speaks HTTP/1.1 only, even
// to an https upstream offering h2: net/http's HTTP/2 transport sends a
// request again after a peer's PROTOCOL_ERROR reset whatever its headers
// (golang/go#47635), and a request Warden decided reaches the upstream at
// most once (docs/security.md, fifteenth pass). UpstreamClient gets that
// from its DialContext without ForceAttemptHTTP2 or Protocols; the test adds
// only the trust of the test server's certificate (RootCAs), and the
// control row (ForceAttemptHTTP2) shows the server does speak h2.
func TestUpstreamClientHTTP1(t *testing.T) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	up.EnableHTTP2 = true
	up.StartTLS()
	t.Cleanup(up.Close)
	roots := up.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	for _, tc := range []struct {
		name  string
		force bool
		major int
	}{
		{"as built", false, 1},
		{"control: HTTP/2 forced", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := UpstreamClient(Limits{}, StreamLimits{}).Transport.(*http.Transport)
			if tr.TLSClientConfig != nil || tr.ForceAttemptHTTP2 || tr.Protocols != nil && tr.Protocols.HTTP2() || tr.TLSNextProto != nil {
				t.Fatalf("UpstreamClient opts into HTTP/2 or sets TLS itself: %+v", tr)
			}
			tr.TLSClientConfig = &tls.Config{RootCAs: roots}
			tr.ForceAttemptHTTP2 = tc.force
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Get(up.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.ProtoMajor != tc.major {
				t.Errorf("%s, want HTTP/%d", resp.Proto, tc.major)
			}
		})
	}
}
