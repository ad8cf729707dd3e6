package tool

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/agentrunner/agentrunner/config"
)

// FromConfig returns the spec of a tool declared in configuration: the
// implementation's defaults with the configuration's overrides (name,
// description, parameters, timeout, retries, breaker). cfg may be nil.
//
// A zero timeout, a nil retries.max and an empty retries.backoff keep the
// defaults; the breaker is taken from cfg as it is, since failures 0 is how
// configuration turns the breaker off. Every built-in tool builds its spec
// here, so an override means the same and fails with the same words for
// all of them.
func FromConfig(defaults Spec, cfg *config.Tool) (Spec, error) {
	spec := defaults
	if cfg == nil {
		return spec, nil
	}
	if cfg.Name != "" {
		spec.Name = cfg.Name
	}
	fail := func(format string, args ...any) (Spec, error) {
		return Spec{}, fmt.Errorf("tool %q: "+format, append([]any{spec.Name}, args...)...)
	}
	if cfg.Description != "" {
		spec.Description = cfg.Description
	}
	if len(cfg.Parameters) > 0 {
		v, err := decodeJSON(cfg.Parameters)
		if err != nil {
			return fail("parameters are not valid JSON: %v", err)
		}
		if _, ok := v.(map[string]any); !ok {
			return fail("parameters must be a JSON Schema object, got %s", jsonKind(v))
		}
		spec.Parameters = json.RawMessage(bytes.Clone(cfg.Parameters))
	}
	switch t := cfg.Timeout.D(); {
	case t < 0:
		return fail("timeout must be positive, got %s", t)
	case t > 0:
		spec.Timeout = t
	}
	if r := cfg.Retries; r != nil {
		if r.Max != nil {
			if *r.Max < 0 {
				return fail("retries.max must not be negative, got %d", *r.Max)
			}
			spec.Retries = *r.Max
		}
		if len(r.Backoff) > 0 {
			if r.Backoff[0] <= 0 {
				return fail("retries.backoff must be positive, got %s", r.Backoff[0])
			}
			spec.Backoff = r.Backoff[0].D()
		}
	}
	spec.BreakerFailures, spec.BreakerOpenFor = cfg.Breaker.Failures, cfg.Breaker.OpenFor.D()
	switch {
	case spec.BreakerFailures < 0:
		return fail("breaker.failures must not be negative, got %d", spec.BreakerFailures)
	case spec.BreakerOpenFor < 0:
		return fail("breaker.open_for must not be negative, got %s", spec.BreakerOpenFor)
	case spec.BreakerFailures > 0 && spec.BreakerOpenFor == 0:
		return fail("breaker.open_for must be positive when breaker.failures is set")
	}
	return spec, nil
}
