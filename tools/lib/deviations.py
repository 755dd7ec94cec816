"""Decided deviations of evidence-store's answers from prompt-diary's, which the differential
checks (tools/check/test_differential.py, tools/realday/compare.py) set aside.

DECIDED_HINTS maps each of evidence-store's wordings to prompt-diary's (0.2.10 and 0.2.20 say
the same). The hint for a citation outside the chain's turn is the user's wording: it names
the evidence chain's indexed turn, where prompt-diary says only "the indexed turn".
"""

DECIDED_HINTS = {
    "cite only lines inside the evidence chain's indexed turn": "cite only lines inside the indexed turn",
}
