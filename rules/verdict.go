package rules

// Code is a MACP error code from the error-code registry. The empty Code means
// no error.
type Code string

// The error codes Warden answers with. They are the registry's codes, used the
// way the reference runtime uses them.
const (
	CodeOK                      Code = ""
	CodeUnauthenticated         Code = "UNAUTHENTICATED"
	CodeForbidden               Code = "FORBIDDEN"
	CodeSessionNotFound         Code = "SESSION_NOT_FOUND"
	CodeSessionNotOpen          Code = "SESSION_NOT_OPEN"
	CodeDuplicateMessage        Code = "DUPLICATE_MESSAGE"
	CodeSessionAlreadyExists    Code = "SESSION_ALREADY_EXISTS"
	CodeInvalidEnvelope         Code = "INVALID_ENVELOPE"
	CodeUnsupportedVersion      Code = "UNSUPPORTED_PROTOCOL_VERSION"
	CodeModeNotSupported        Code = "MODE_NOT_SUPPORTED"
	CodePayloadTooLarge         Code = "PAYLOAD_TOO_LARGE"
	CodeRateLimited             Code = "RATE_LIMITED"
	CodeInvalidSessionID        Code = "INVALID_SESSION_ID"
	CodeInternal                Code = "INTERNAL_ERROR"
	CodeUnknownPolicyVersion    Code = "UNKNOWN_POLICY_VERSION"
	CodePolicyDenied            Code = "POLICY_DENIED"
	CodeInvalidPolicyDefinition Code = "INVALID_POLICY_DEFINITION"
	CodeResourceExhausted       Code = "RESOURCE_EXHAUSTED"

	// MCP codes; the MCP adapter maps each to its JSON-RPC error.
	CodeTaskNotFound     Code = "TASK_NOT_FOUND"     // -32602, the same for unknown and not owned
	CodeInvalidTaskState Code = "INVALID_TASK_STATE" // -32602 (SEP-2669 status rules)
	CodeInvalidParams    Code = "INVALID_PARAMS"     // -32602
	CodeMethodNotFound   Code = "METHOD_NOT_FOUND"   // -32601 (taskSupport)
	CodeHeaderMismatch   Code = "HEADER_MISMATCH"    // HTTP 400, -32020
	CodeInvalidRequest   Code = "INVALID_REQUEST"    // HTTP 400, -32600
)

// GRPCStatus is the gRPC status code (numbered as google.golang.org/grpc/codes)
// a gRPC call refused with c carries: how the runtime refuses control RPCs,
// and how Envoy answers a gRPC call Warden's ext_authz denied.
func (c Code) GRPCStatus() uint32 {
	switch c {
	case CodeUnauthenticated:
		return 16 // UNAUTHENTICATED
	case CodeForbidden, CodePolicyDenied:
		return 7 // PERMISSION_DENIED
	case CodeSessionNotFound, CodeUnknownPolicyVersion:
		return 5 // NOT_FOUND
	case CodeSessionNotOpen:
		return 9 // FAILED_PRECONDITION
	case CodeSessionAlreadyExists, CodeDuplicateMessage:
		return 6 // ALREADY_EXISTS
	case CodeResourceExhausted, CodeRateLimited, CodePayloadTooLarge:
		return 8 // RESOURCE_EXHAUSTED
	case CodeInternal:
		return 14 // UNAVAILABLE: Warden could not decide; retry
	}
	return 3 // INVALID_ARGUMENT
}

// Reason is the machine-readable cause of a verdict. The set is closed: the
// same value is the metric label, the log field and the decision-log entry.
type Reason string

// The reasons a verdict can carry.
const (
	ReasonAllowed             Reason = "allowed"
	ReasonDuplicate           Reason = "duplicate"
	ReasonMalformedEnvelope   Reason = "malformed_envelope"
	ReasonMalformedPayload    Reason = "malformed_payload"
	ReasonUnsupportedVersion  Reason = "unsupported_version"
	ReasonModeNotSupported    Reason = "mode_not_supported"
	ReasonModeMismatch        Reason = "mode_mismatch"
	ReasonUnknownMessageType  Reason = "unknown_message_type"
	ReasonRuntimeOnly         Reason = "runtime_only_message"
	ReasonSessionUnknown      Reason = "session_unknown"
	ReasonSessionExists       Reason = "session_exists"
	ReasonSessionNotOpen      Reason = "session_not_open"
	ReasonSessionExpired      Reason = "session_expired"
	ReasonInvalidSessionID    Reason = "invalid_session_id"
	ReasonInvalidTTL          Reason = "invalid_ttl"
	ReasonInvalidParticipants Reason = "invalid_participants"
	ReasonVersionMismatch     Reason = "version_mismatch"
	ReasonUnknownPolicy       Reason = "unknown_policy"
	ReasonBoundPolicyUnknown  Reason = "bound_policy_unknown"
	ReasonPolicyModeMismatch  Reason = "policy_mode_mismatch"
	ReasonDuplicateForeignID  Reason = "duplicate_message_id_other_sender"
	ReasonReusedID            Reason = "message_id_reused"
	ReasonClockSkew           Reason = "timestamp_ahead"
	ReasonIdentityMismatch    Reason = "payload_identity_mismatch"
	ReasonUnknownReference    Reason = "unknown_reference"
	ReasonStateConflict       Reason = "state_conflict"
	ReasonReofferDeclined     Reason = "reoffer_to_declined_target"
	ReasonPolicyForbids       Reason = "policy_forbids"
	ReasonNotEligible         Reason = "commitment_not_eligible"
	ReasonOutcomeMismatch     Reason = "outcome_mismatch"
	ReasonNotAuthorized       Reason = "sender_not_authorized"
	ReasonGovernance          Reason = "governance_denied"
	ReasonOperatorPolicy      Reason = "operator_policy"
	ReasonSenderMismatch      Reason = "sender_mismatch"
	ReasonUnauthenticated     Reason = "unauthenticated"
	ReasonTableFull           Reason = "session_table_full"
	ReasonNotOwner            Reason = "not_task_owner"
	ReasonUnknownTask         Reason = "unknown_task"
	ReasonTaskState           Reason = "task_state"
	ReasonTaskSupport         Reason = "task_support"
	ReasonSteerTooLarge       Reason = "steer_too_large"
	ReasonSteerQueueFull      Reason = "steer_queue_full"
	ReasonArgumentsTooLarge   Reason = "arguments_too_large"
	ReasonPayloadTooLarge     Reason = "payload_too_large" // a MACP payload over the runtime's bound, or over what an operator policy reads
	ReasonRateLimited         Reason = "rate_limited"      // a MACP sender over the runtime's per-sender rate limit
	ReasonHeaderMismatch      Reason = "header_mismatch"
	ReasonMalformedRequest    Reason = "malformed_request"
	ReasonUnknownMethod       Reason = "unknown_method"
	ReasonOriginRefused       Reason = "origin_refused"
	ReasonWebhookRefused      Reason = "webhook_refused"
	ReasonPushConfigRevoked   Reason = "push_config_revoked"
	ReasonUnavailable         Reason = "unavailable"      // could not decide: keys, a store or a status could not be read
	ReasonNotSeenAtDoor       Reason = "not_seen_at_door" // ext_authz: what the rule decides on never reaches it (a stream's messages, a read's answer)
)

// Rank orders verdicts the way the reference runtime orders its checks, so that
// when several checks fail the client sees the code the runtime would give.
// The lowest rank wins.
type Rank uint8

// The ranks, in check order.
const (
	// RankPre covers envelope shape, session existence, duplicates and the
	// OPEN gate. A deny here skips the policy.
	RankPre Rank = iota
	// RankCoarseAuthority is the policy's coarse authority check (declared
	// participant, initiator, commitment authority).
	RankCoarseAuthority
	// RankMode covers mode validation that the runtime performs before the
	// fine-grained authority check of a message.
	RankMode
	// RankFineAuthority is the policy's fine-grained authority check (active
	// assignee, offer target, proposal author).
	RankFineAuthority
	// RankModePost covers mode validation after the fine-grained authority
	// check, and commitment structure and eligibility.
	RankModePost
	// RankGovernance is the bound governance policy and Warden's commitment
	// consistency rules.
	RankGovernance
	// RankOperator is an operator-supplied rule.
	RankOperator
)

// Verdict is the result of one check: allowed when Code is empty.
type Verdict struct {
	Code   Code
	Reason Reason
	Detail string // for a person; never a metric label
	Rank   Rank
}

// OK reports whether the verdict allows the message.
func (v Verdict) OK() bool { return v.Code == CodeOK }
