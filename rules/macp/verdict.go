package macp

import "github.com/agentwarden/warden/rules"

// deny and invalid build this package's refusals.
func deny(rank rules.Rank, code rules.Code, reason rules.Reason, detail string) rules.Verdict {
	return rules.Verdict{Code: code, Reason: reason, Detail: detail, Rank: rank}
}

func invalid(rank rules.Rank, reason rules.Reason, detail string) rules.Verdict {
	return deny(rank, rules.CodeInvalidEnvelope, reason, detail)
}
