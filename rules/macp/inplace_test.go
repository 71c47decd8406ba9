package macp

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
	"github.com/agentwarden/warden/wire/strictpb"
)

// taskUpdateSeeds are payloads taskUpdateID must judge as strictpb does:
// valid ones, a field sent twice, and each refusal (unknown field, a known
// one with another wire type, bad UTF-8, a truncated value, a group).
func taskUpdateSeeds(t testing.TB) [][]byte {
	ok, err := proto.Marshal(&taskv1.TaskUpdatePayload{TaskId: "t", Status: "running", Progress: 0.5, Message: "half way", PartialOutput: []byte{0xff}})
	if err != nil {
		t.Fatal(err)
	}
	str := func(num protowire.Number, s string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), s)
	}
	cat := func(bs ...[]byte) (out []byte) {
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	return [][]byte{
		nil, ok, ok[:len(ok)-1],
		cat(str(1, "a"), str(1, "b")),
		cat(str(1, "t"), str(6, "x")),
		str(1, "\xff"), str(2, "\xc0"), str(4, "\xed\xa0\x80"), str(5, "\xff"),
		protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1),
		protowire.AppendFixed32(protowire.AppendTag(nil, 3, protowire.Fixed32Type), 1),
		cat(protowire.AppendFixed32(protowire.AppendTag(nil, 3, protowire.Fixed32Type), 1), str(1, "ab")),
		protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 1<<62),
		protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), "12345678"),
		cat(protowire.AppendTag(nil, 1, protowire.StartGroupType), protowire.AppendTag(nil, 1, protowire.EndGroupType)),
		protowire.AppendTag(nil, 0, protowire.BytesType),
		{0x0a, 0x80},
	}
}

// taskUpdateOracle is the decoding reading taskUpdateID replaces.
func taskUpdateOracle(b []byte) (*taskv1.TaskUpdatePayload, bool) {
	var p taskv1.TaskUpdatePayload
	return &p, strictpb.Unmarshal(b, &p) == nil
}

// TestTaskUpdateID holds taskUpdateID to strictpb on the seeds.
func TestTaskUpdateID(t *testing.T) {
	for i, b := range taskUpdateSeeds(t) {
		checkTaskUpdateID(t, b, i)
	}
}

// FuzzTaskUpdateID holds the in-place reading of a TaskUpdate's payload to
// strictpb.Unmarshal: the same bytes refused, the same task_id read, the
// same value for a policy.
func FuzzTaskUpdateID(f *testing.F) {
	for _, b := range taskUpdateSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkTaskUpdateID(t, b, 0) })
}

func checkTaskUpdateID(t *testing.T, b []byte, i int) {
	t.Helper()
	p, want := taskUpdateOracle(b)
	id, got := taskUpdateID(b)
	if got != want {
		t.Fatalf("%d %x: taskUpdateID ok %v, strictpb ok %v", i, b, got, want)
	}
	if !got {
		return
	}
	if string(id) != p.GetTaskId() {
		t.Fatalf("%d %x: task_id %q, strictpb %q", i, b, id, p.GetTaskId())
	}
	if lv, pv := lazyPayload(b, taskUpdateType).Value(), PayloadOf(p).Value(); !reflect.DeepEqual(lv, pv) {
		t.Fatalf("%d %x: value %v, strictpb %v", i, b, lv, pv)
	}
}
