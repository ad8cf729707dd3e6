package dashboard

import (
	"fmt"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
)

// priceFunc returns the prices of the provider an attempt ran on; nil
// when it has none configured, or when its provider is not known (a
// pipeline or an agent no longer configured).
type priceFunc func(*agentrunner.Attempt) *config.Prices

// pricesFor returns the prices of a run's attempts by the configuration
// in force: a state step's agent runs on backlog.provider (spec 5),
// another attempt's agent on its own provider.
func pricesFor(cfg *config.Config, p *agentrunner.Pipeline) priceFunc {
	return func(a *agentrunner.Attempt) *config.Prices {
		name := ""
		switch {
		case p != nil && p.Steps[a.Step] != nil && p.Steps[a.Step].Kind == config.StepState:
			name = cfg.BacklogProvider()
		case cfg.Agents[a.Agent] != nil:
			name = cfg.Agents[a.Agent].Provider
		}
		if prov := cfg.Providers[name]; prov != nil {
			return prov.Prices
		}
		return nil
	}
}

// costOf is what usage costs at prices, in US dollars. Input tokens
// include the cached ones (the runner counts the whole prompt), so only
// the rest are charged at the input price.
func costOf(u agentrunner.Usage, p *config.Prices) float64 {
	cached := min(max(u.CachedTokens, 0), max(u.InputTokens, 0))
	fresh := max(u.InputTokens, 0) - cached
	cachedPrice := p.InputPerMTok
	if p.CachedInputPerMTok != nil {
		cachedPrice = *p.CachedInputPerMTok
	}
	return (float64(fresh)*p.InputPerMTok + float64(cached)*cachedPrice + float64(max(u.OutputTokens, 0))*p.OutputPerMTok) / 1e6
}

// spent is the cost of a step's or a run's attempts.
type spent struct {
	// Dollars sums the attempts whose provider has prices.
	Dollars float64
	// Priced: at least one attempt had prices; else the cost is unknown
	// and only tokens are shown.
	Priced bool
	// Unpriced counts the attempts that spent tokens on a provider
	// without prices: the cost shown is then a lower bound.
	Unpriced int
}

// add counts one attempt's cost, if its provider has prices.
func (s *spent) add(a *agentrunner.Attempt, p *config.Prices) {
	switch {
	case p != nil:
		s.Dollars += costOf(a.Usage, p)
		s.Priced = true
	case a.Usage.InputTokens > 0 || a.Usage.OutputTokens > 0:
		s.Unpriced++
	}
}

// fmtDollars shows a cost: cents for a dollar or more, more digits
// below, so a cheap step is not shown as $0.00.
func fmtDollars(v float64) string {
	switch {
	case v >= 1:
		return fmt.Sprintf("$%.2f", v)
	case v >= 0.01:
		return fmt.Sprintf("$%.3f", v)
	case v == 0:
		return "$0"
	}
	return fmt.Sprintf("$%.4f", v)
}

// String shows the cost, marked as a lower bound when some attempts had
// no prices.
func (s spent) String() string {
	if !s.Priced {
		return "—"
	}
	if s.Unpriced > 0 {
		return "≥ " + fmtDollars(s.Dollars)
	}
	return fmtDollars(s.Dollars)
}
