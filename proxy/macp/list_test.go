package macp

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestListSessionsPagesTheCallersOwn: ListSessions through Warden pages over
// the caller's sessions only. Its pages hold exactly page_size of them (the
// last fewer), its token is empty exactly when none follow, and a token shows
// nothing and opens for nobody else. Before, the runtime's own token (the
// base64url of "v1:<last session id of its page>") came through a filtered
// page: with page_size 1 a principal walked every session id of the runtime,
// and its empty pages counted the others' sessions.
func TestListSessionsPagesTheCallersOwn(t *testing.T) {
	_, enf := happyPath(t)
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			f, addr := startFakeRuntime(t)
			// 1,300 sessions, over two of the runtime's largest pages; alice
			// takes part in a few, across the page boundary among them.
			var mine []string
			f.mu.Lock()
			for i := range 1300 {
				id := fmt.Sprintf("s-%04d", i)
				meta := &macpv1.SessionMetadata{SessionId: id, Initiator: "bob", Participants: []string{"bob", "dave"}}
				switch {
				case i%97 == 0 || i >= 998 && i <= 1001:
					meta.Participants = append(meta.Participants, "alice")
					mine = append(mine, id)
				case i == 1299:
					meta.Initiator = "alice"
					mine = append(mine, id)
				}
				f.sessions[id] = &fakeSession{meta: meta}
			}
			f.mu.Unlock()
			client := macpv1.NewMACPRuntimeServiceClient(startSidecar(t, enf, addr, transport))
			list := func(who string, size int32, token string) (*macpv1.ListSessionsResponse, error) {
				ctx, cancel := context.WithTimeout(as(context.Background(), who), 10*time.Second)
				defer cancel()
				return client.ListSessions(ctx, &macpv1.ListSessionsRequest{PageSize: size, PageToken: token})
			}
			walk := func(who string, size int32) (ids []string, tokens []string) {
				t.Helper()
				token := ""
				for calls := 0; ; calls++ {
					if calls > 100 {
						t.Fatalf("%s, page_size %d: no end after %d pages", who, size, calls)
					}
					resp, err := list(who, size, token)
					if err != nil {
						t.Fatalf("%s, page_size %d, page %d: %v", who, size, calls, err)
					}
					for _, m := range resp.GetSessions() {
						ids = append(ids, m.GetSessionId())
					}
					token = resp.GetNextPageToken()
					if token == "" {
						return ids, tokens
					}
					if n := len(resp.GetSessions()); n != int(max(size, 1)) {
						t.Errorf("%s, page_size %d, page %d: %d sessions and a token: a short page shows what was filtered", who, size, calls, n)
					}
					tokens = append(tokens, token)
				}
			}
			for _, size := range []int32{1, 5, 0} {
				ids, tokens := walk("alice", size)
				if !slices.Equal(ids, mine) {
					t.Errorf("alice, page_size %d: listed %q, want %q", size, ids, mine)
				}
				for _, tok := range tokens {
					raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, "wt2."))
					for i := range 1300 {
						id := fmt.Sprintf("s-%04d", i)
						if strings.Contains(tok, id) || strings.Contains(string(raw), id) {
							t.Errorf("alice, page_size %d: token %q shows session %s", size, tok, id)
						}
					}
				}
			}
			if ids, tokens := walk("carol", 1); len(ids) != 0 || len(tokens) != 0 {
				t.Errorf("carol, who takes part in nothing: %d sessions, %d tokens; want one empty last page", len(ids), len(tokens))
			}

			page, err := list("alice", 1, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name, who, token string
				size             int32
			}{
				{"alice's token presented by bob", "bob", page.GetNextPageToken(), 1},
				{"the runtime's own token", "alice", base64.RawURLEncoding.EncodeToString([]byte("v1:s-0500")), 1},
				{"garbage", "alice", "not a token", 1},
				{"a negative page_size", "alice", "", -1},
			} {
				if _, err := list(tc.who, tc.size, tc.token); status.Code(err) != codes.InvalidArgument {
					t.Errorf("%s: %v, want INVALID_ARGUMENT", tc.name, err)
				}
			}
		})
	}
}
