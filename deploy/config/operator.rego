# Operator rules for MACP, compiled with Warden's defaults. Deny rules go in
# package warden.macp (a file in any other package is refused by
# `warden check` and `warden serve`).
package warden.macp

import rego.v1

# For example, keep one agent out:
# deny contains {"code": "FORBIDDEN", "reason": "operator_policy", "msg": "blocked"} if input.principal.id == "agent://blocked"
