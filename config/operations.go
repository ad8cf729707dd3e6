package config

// Shutdown is how serve and run stop on SIGTERM or SIGINT (FR-010): no
// step starts any more, and the running ones may finish within Grace;
// those still running then are interrupted and recorded as shut down,
// which costs them no retry: they start again at once at the next start.
type Shutdown struct {
	// Grace is how long running steps may take to finish; 0 interrupts
	// them at once. A second signal cuts it short.
	Grace Duration `yaml:"grace"`
}

// Reload is how serve and run read the configuration again, besides an
// operator's reload (the API, agentrunner reload) and SIGHUP.
type Reload struct {
	// Watch reloads when the configuration file or a file it names
	// (prompts, templates, tools.md) changes.
	Watch bool `yaml:"watch"`
}
