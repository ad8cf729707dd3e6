package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/engine"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/runtime/mock"
	"github.com/agentrunner/agentrunner/runtime/process"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/workspace"
)

// loadWorkspace reads the configuration and every file it names.
func loadWorkspace(path string) (*workspace.Workspace, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	return loadWorkspaceFrom(cfg)
}

func loadWorkspaceFrom(cfg *config.Config) (*workspace.Workspace, error) {
	return workspace.Load(cfg)
}

// buildRuntimes makes one runtime per provider. Problems are reported per
// provider, located in the configuration.
func buildRuntimes(cfg *config.Config, clock agentrunner.Clock) (map[string]agentrunner.Runtime, config.Problems) {
	runtimes := map[string]agentrunner.Runtime{}
	var problems config.Problems
	names := make([]string, 0, len(cfg.Providers))
	for name := range cfg.Providers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := cfg.Providers[name]
		if p == nil {
			continue // reported by the configuration's validation
		}
		switch p.Kind {
		case config.ProviderMock:
			runtimes[name] = mock.New(mock.Options{Now: clock.Now})
		case config.ProviderProcess:
			rt, err := process.New(process.Config{Command: p.Command, Env: p.Env, KillGrace: p.KillGrace.D()})
			if err != nil {
				problems = append(problems, config.Problem{Where: cfg.Where("providers." + name), Key: "providers." + name, Message: err.Error()})
				continue
			}
			runtimes[name] = rt
		}
	}
	return runtimes, problems
}

// buildExec returns the Execution Service client, or nil when the pipeline
// does not use one. A configured token variable must be set (FR-139).
func buildExec(cfg *config.Config) (engine.ExecutionService, error) {
	if cfg.ExecutionService.URL == "" {
		return nil, nil
	}
	var token string
	if name := cfg.ExecutionService.TokenEnv; name != "" {
		token = os.Getenv(name)
		if token == "" {
			return nil, config.Problems{{Where: cfg.Where("execution_service.token_env"), Key: "execution_service.token_env",
				Message: fmt.Sprintf("environment variable %s is not set", name)}}
		}
	}
	return execsvc.NewClient(cfg.ExecutionService.URL, token, cfg.ExecutionService.RequestTimeout.D())
}

// runner is a workspace opened for running: locked, with its store.
type runner struct {
	ws     *workspace.Workspace
	store  *sqlite.Store
	lock   *workspace.Lock
	engine *engine.Engine
}

func (r *runner) Close() {
	if r.store != nil {
		r.store.Close()
	}
	r.lock.Release()
}

// openRunner locks the workspace, opens its store and builds the engine.
func openRunner(ctx context.Context, ws *workspace.Workspace, exec engine.ExecutionService, clock agentrunner.Clock, log *slog.Logger, onEvent func(*agentrunner.Event)) (*runner, error) {
	runtimes, problems := buildRuntimes(ws.Config, clock)
	if len(problems) > 0 {
		return nil, problems
	}
	lock, err := ws.Layout.Acquire()
	if err != nil {
		return nil, failureError(err)
	}
	r := &runner{ws: ws, lock: lock}
	if r.store, err = sqlite.Open(ctx, ws.Config.Abs(ws.Config.State.Path)); err != nil {
		r.Close()
		return nil, err
	}
	r.engine, err = engine.New(engine.Options{
		Workspace: ws, Store: r.store, Runtimes: runtimes, Exec: exec, Clock: clock, Logger: log, OnEvent: onEvent,
	})
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}
