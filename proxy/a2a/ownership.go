package a2a

import (
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules/a2a"
)

// Ownership. An id in an answer becomes a handle, which proves ownership
// from then on, only where it is the caller's: a handle of the request named
// it (x.mine), or Warden knows the caller owns it. A message that names no
// task and no context is given a fresh context by Warden, recorded as the
// caller's before it is forwarded: contexts are never adopted from answers,
// so an answer to another caller cannot claim one while its creator's
// request is in flight. The task an answer is about (a result's task, an
// event's taskId) must be the one the request named; a message that named
// none may create one (the first its answer is about) in the message's
// context, which nobody owns yet and which the caller then owns (adopt). An
// id Warden knew and forgot (evicted from a replica's table with no shared
// store) is nobody's: not adopted. Anything else an answer names is not
// handed over: a history or status message's taskId and contextId are left
// out (both optional in a Message), a referenceTaskIds entry is dropped (the
// list stays a list of the caller's tasks; a replacement would be an id that
// opens nothing), a ListTasks task or a push config of another task is left
// out, and a result or event about another's task is answered
// TaskNotFoundError.

// idKey is one upstream id of one kind.
type idKey struct {
	kind a2a.Kind
	id   string
}

// prove records that a handle of the request proved id the caller's.
func (x *exchange) prove(kind a2a.Kind, id string) {
	x.mine.set(idKey{kind, id}, struct{}{})
}

// owner returns who owns a task or a context as Warden knows it ("" when
// unknown); an error means the shared store could not be read.
func (x *exchange) owner(kind a2a.Kind, id string) (string, error) {
	if x.mine.has(idKey{kind, id}) {
		return x.principal, nil
	}
	if id == "" {
		return "", nil
	}
	o, err := x.s.enforcer.Owners(x.ctx(), x.principal, ownerKey(kind, id))
	if err != nil {
		return "", err
	}
	return o[0], nil
}

// owns reports whether a task or context is the caller's. What could not be
// read is nobody's.
func (x *exchange) owns(kind a2a.Kind, id string) bool {
	o, err := x.owner(kind, id)
	if err != nil {
		// Whose it is cannot be told: nothing of the answer passes.
		x.s.log.Warn("could not read whose an A2A task is; the answer does not pass", "task_id", id, "err", err)
		x.unreadable = true
		return false
	}
	if o == x.principal {
		x.prove(kind, id)
		return true
	}
	return x.dryRun("an id of another's", id)
}

// dryRun reports whether what an answer would not hand over passes all the
// same (dry-run mode), logging it.
func (x *exchange) dryRun(what, id string) bool {
	if x.dry {
		x.s.enforcer.Withheld(x.ctx(), "a2a", x.principal, x.call.Method, "an answer would not have handed over "+what+" ("+id+")")
	}
	return x.dry
}

// creation says what an answer may make the caller's of an id nobody owns.
type creation int

const (
	// noCreate: nothing; only what is the caller's already.
	noCreate creation = iota
	// create: a new task, which a message's answer created; an id Warden
	// knew and forgot is not new.
	create
	// ofOwnTask: the context of a task that was the caller's before this
	// answer (Warden let the task be made only in a context of the
	// caller's or a new one), forgotten or not.
	ofOwnTask
)

// adopt reports whether an id the answer is about is the caller's, making
// it so when nobody owns it and how allows. Recording it tells whose it is
// (set if absent, here and in the shared store): one round trip for a new
// id, none for one this replica knows.
func (x *exchange) adopt(kind a2a.Kind, id, state string, how creation) bool {
	f := owners.Fact{Key: ownerKey(kind, id)}
	if kind == a2a.KindTask {
		f.Status = state
	}
	mine := x.mine.has(idKey{kind, id})
	if !mine && how != noCreate {
		f.Created, f.Recall = true, how == ofOwnTask
	}
	got, err := x.apply(f)
	if err != nil {
		x.s.log.Warn("could not tell whose an A2A task or context is; the answer about it does not pass", "id", id, "err", err)
		x.unreadable = true
		return false
	}
	if !mine && got[0] != x.principal {
		return x.dryRun("a task or context of another's", id)
	}
	x.prove(kind, id)
	return true
}
