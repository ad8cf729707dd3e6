package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProviderPrices: a provider's prices are read from the file and from
// the environment, the cached price is absent unless given, and a price
// that is negative, not a number or infinite is refused where it was
// given.
func TestProviderPrices(t *testing.T) {
	cached := 0.5
	withPrices := strings.Replace(valid, "  cli: {kind: process",
		"  api:\n    kind: mock\n    prices: {input_per_mtok: 2.0, output_per_mtok: 8, cached_input_per_mtok: 0.5}\n  cli: {kind: process", 1)
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want map[string]*Prices
	}{
		{name: "none", yaml: valid, want: map[string]*Prices{"cli": nil, "mock": nil}},
		{name: "in the file", yaml: withPrices,
			want: map[string]*Prices{"api": {InputPerMTok: 2, OutputPerMTok: 8, CachedInputPerMTok: &cached}, "cli": nil, "mock": nil}},
		{name: "from the environment", yaml: valid,
			env:  map[string]string{"AGENTRUNNER_PROVIDERS_CLI_PRICES_INPUT_PER_MTOK": "3", "AGENTRUNNER_PROVIDERS_CLI_PRICES_OUTPUT_PER_MTOK": "15"},
			want: map[string]*Prices{"cli": {InputPerMTok: 3, OutputPerMTok: 15}, "mock": nil}},
		{name: "the environment over the file", yaml: withPrices,
			env:  map[string]string{"AGENTRUNNER_PROVIDERS_API_PRICES_OUTPUT_PER_MTOK": "10"},
			want: map[string]*Prices{"api": {InputPerMTok: 2, OutputPerMTok: 10, CachedInputPerMTok: &cached}, "cli": nil, "mock": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parse(t, tt.yaml, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]*Prices{}
			for name, p := range c.Providers {
				got[name] = p.Prices
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("prices (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProviderPricesRefused: prices are numbers of dollars, 0 or more;
// each bad one is named with its file and line, or its variable.
func TestProviderPricesRefused(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want []string
	}{
		{name: "negative", yaml: "  api:\n    kind: mock\n    prices: {input_per_mtok: -1, output_per_mtok: 8, cached_input_per_mtok: -0.5}\n",
			want: []string{
				"agentrunner.yaml:6:14: providers.api.prices.input_per_mtok: must be a number of US dollars per million tokens, 0 or more, got -1",
				"agentrunner.yaml:6:54: providers.api.prices.cached_input_per_mtok: must be a number of US dollars per million tokens, 0 or more, got -0.5",
			}},
		{name: "not a number", yaml: "  api:\n    kind: mock\n    prices: {output_per_mtok: cheap}\n",
			want: []string{`agentrunner.yaml:6:31: providers.api.prices.output_per_mtok: want a number, got the string "cheap"`}},
		{name: "unknown key", yaml: "  api:\n    kind: mock\n    prices: {input_per_token: 1}\n",
			want: []string{`agentrunner.yaml:6:14: providers.api.prices: unknown key "input_per_token" (known keys: cached_input_per_mtok, input_per_mtok, output_per_mtok)`}},
		{name: "NaN from the environment", env: map[string]string{"AGENTRUNNER_PROVIDERS_CLI_PRICES_INPUT_PER_MTOK": "NaN"},
			want: []string{"environment variable AGENTRUNNER_PROVIDERS_CLI_PRICES_INPUT_PER_MTOK: providers.cli.prices.input_per_mtok: must be a number of US dollars per million tokens, 0 or more, got NaN"}},
		{name: "infinite from the environment", env: map[string]string{"AGENTRUNNER_PROVIDERS_CLI_PRICES_OUTPUT_PER_MTOK": "+Inf"},
			want: []string{"environment variable AGENTRUNNER_PROVIDERS_CLI_PRICES_OUTPUT_PER_MTOK: providers.cli.prices.output_per_mtok: must be a number of US dollars per million tokens, 0 or more, got +Inf"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(valid, "  cli: {kind: process", tt.yaml+"  cli: {kind: process", 1)
			if diff := cmp.Diff(tt.want, problems(t, src, tt.env)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
