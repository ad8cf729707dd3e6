package execution

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/config"
)

// checkValidity reads the strategy's validity window and refuses one that
// is malformed (FR-052). It returns the end of the window, zero when none
// is configured; whether it is over is the hand-off's to judge.
func checkValidity(data []byte, v config.Validity) (time.Time, error) {
	if v.Until == "" && v.From == "" {
		return time.Time{}, nil
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return time.Time{}, agentrunner.Fail(agentrunner.ClassInvalidOutput, "strategy is not JSON: %v", err)
	}
	var from, until time.Time
	var err error
	if v.From != "" {
		if from, err = validityField(doc, v.From); err != nil {
			return time.Time{}, err
		}
	}
	if v.Until != "" {
		if until, err = validityField(doc, v.Until); err != nil {
			return time.Time{}, err
		}
		if !from.IsZero() && !until.After(from) {
			return time.Time{}, agentrunner.Fail(agentrunner.ClassInvalidOutput, "validity window ends (%s) before it begins (%s)", until.Format(time.RFC3339), from.Format(time.RFC3339))
		}
	}
	return until, nil
}

// validityField reads the RFC 3339 time at JSON pointer ptr of doc.
func validityField(doc any, ptr string) (time.Time, error) {
	raw, ok := artifact.Lookup(doc, ptr)
	s, isString := raw.(string)
	if !ok || !isString {
		return time.Time{}, agentrunner.Fail(agentrunner.ClassInvalidOutput, "validity field %s is missing or not a string", ptr)
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, agentrunner.Fail(agentrunner.ClassInvalidOutput, "validity field %s: %q is not an RFC 3339 time", ptr, s)
	}
	return t, nil
}

// checkExpiry refuses to hand over a strategy whose validity window is
// over (FR-052).
func checkExpiry(until, now time.Time) error {
	if until.IsZero() || until.After(now) {
		return nil
	}
	return agentrunner.Fail(agentrunner.ClassInvalidOutput, "strategy expired at %s, before it could be handed over", until.UTC().Format(time.RFC3339))
}

// validUntil reads the end of a stored strategy's validity window.
func validUntil(strategy []byte, v config.Validity) (time.Time, error) {
	var doc any
	if err := json.Unmarshal(strategy, &doc); err != nil {
		return time.Time{}, err
	}
	raw, ok := artifact.Lookup(doc, v.Until)
	s, isString := raw.(string)
	if !ok || !isString {
		return time.Time{}, fmt.Errorf("validity field %s is missing or not a string", v.Until)
	}
	return time.Parse(time.RFC3339, s)
}
