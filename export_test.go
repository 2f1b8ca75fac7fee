package toolrun

// What the external tests (package toolrun_test) need of the turn in
// progress of a State, which is unexported: to leave a call as a crashed
// process leaves it, and to read a call's phase.

// MarkStarted leaves call id of s started with an Allow decision, as a
// process that died while the tool ran leaves it.
func MarkStarted(s *State, id string) {
	c := s.call(id)
	c.Phase, c.Decision = phaseStarted, &Decision{}
}

// PhaseOf returns the phase of call id of s, or "" if s has no such call.
func PhaseOf(s *State, id string) string {
	if c := s.call(id); c != nil {
		return string(c.Phase)
	}
	return ""
}

// CanonicalBytes returns the bytes canonicalized for signatures so far.
func CanonicalBytes() int64 { return canonicalBytes.Load() }
