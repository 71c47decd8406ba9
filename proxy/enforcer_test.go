package proxy

import "testing"

func TestOwnerTableShare(t *testing.T) {
	for _, tc := range []struct {
		cfg         Config
		size, share int
	}{
		{Config{}, DefaultSessions, DefaultSessions / DefaultShareDivisor},
		{Config{Sessions: 16}, 16, 16},   // a small table has no share
		{Config{Sessions: 200}, 200, 64}, // an eighth would be 25: at least MinShare
		{Config{Sessions: 8000}, 8000, 1000},
		{Config{Sessions: 8000, SessionsPerPrincipal: 10}, 8000, 10},
	} {
		size, share := tc.cfg.OwnerTable()
		if size != tc.size || share != tc.share {
			t.Errorf("%+v: OwnerTable = %d, %d; want %d, %d", tc.cfg, size, share, tc.size, tc.share)
		}
	}
}
