// Package macp holds the pure MACP protocol state machines: given the state
// of one session and one envelope, it validates the envelope against the
// session lifecycle and the mode's rules, computes the roles the sender holds
// and the facts a policy needs, and returns the verdict and the pending next
// state.
//
// Nothing here does I/O or reads a clock: time is an argument. Authority
// (who may send what) and governance (voting, thresholds) are decided by the
// policies package from the roles and facts computed here; the verdict carries
// a Rank so that the caller can merge both verdicts in the order the MACP
// reference runtime checks them, and a client sees the same error code with or
// without Warden in front of the runtime.
package macp
