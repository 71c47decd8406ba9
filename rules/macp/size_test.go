package macp

import (
	"testing"
	"unsafe"
)

// TestStateSize pins a session, and a task's state, to their size classes:
// what nearly no session has (suspensions or a suspension cap of its own, a
// resolution, senders outside its participants; rejected assignees) costs
// each one pointer.
func TestStateSize(t *testing.T) {
	tests := []struct {
		name      string
		size, max uintptr
	}{
		{"Session", unsafe.Sizeof(Session{}), 176},
		{"taskState", unsafe.Sizeof(taskState{}), 80},
	}
	for _, tc := range tests {
		if tc.size > tc.max {
			t.Errorf("%s is %d bytes, want at most %d", tc.name, tc.size, tc.max)
		}
	}
}
