package stateagent

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/agentdef"
	"github.com/agentrunner/agentrunner/agentout"
	"github.com/agentrunner/agentrunner/taskprompt"
	"github.com/agentrunner/agentrunner/workspace"
)

// answer is an operator's answer to the gate of an earlier visit.
type answer struct {
	visit              int
	question, response string
	operator           string
}

// prompt is the whole prompt of the attempt: the agent's template with
// its variables filled in, then where it works, the answers it was given
// and where its output goes.
func (k *Kind) prompt(ctx context.Context, a *agentrunner.StepAttempt, state string, def *agentdef.Agent, sub *subject) (string, error) {
	refining, err := k.refiningVisits(ctx, sub.itemID)
	if err != nil {
		return "", err
	}
	v := sub.vars(state, refining)
	if v.Artifacts, err = k.artifacts(ctx, sub); err != nil {
		return "", err
	}
	body, err := taskprompt.Build(def.Prompt, v)
	if err != nil {
		return "", agentrunner.Fail(agentrunner.ClassConfig, "the prompt of agent %s (%s): %v", def.ID, def.File, err)
	}
	answers, err := k.answers(ctx, a)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(strings.TrimRight(body, "\n"))
	fmt.Fprintf(&b, "\n\n---\n\n# Run context\n\nYou are %s (%s), the agent of state %s, in step %q of run %s (attempt %d).\n", def.Name, def.ID, state, a.Step.ID, a.Run.ID, a.Attempt.Number)
	fmt.Fprintf(&b, "You work in %s.\n", sub.workDir)
	writeAnswers(&b, answers)
	k.writeOutput(&b, outputPath(a, def), workspace.OutputKind(def))
	return b.String(), nil
}

// writeAnswers gives the agent what people answered to its questions.
func writeAnswers(b *strings.Builder, answers []answer) {
	if len(answers) == 0 {
		return
	}
	b.WriteString("\n## Answers from a person\n\nYour earlier output in this step waited for a person, who answered:\n\n")
	for _, an := range answers {
		fmt.Fprintf(b, "- Visit %d. Question: %s\n  Answer (%s): %s\n", an.visit, an.question, an.operator, an.response)
	}
	b.WriteString("\nTake the answers into account; do not ask the same question again.\n")
}

// writeOutput says where the output goes and what its last lines say.
func (k *Kind) writeOutput(b *strings.Builder, path string, kind agentout.Kind) {
	b.WriteString("\n## Output\n\n")
	if k.onModel() {
		fmt.Fprintf(b, "Your final answer is the %s artifact: answer with its complete markdown content and nothing else.\n", kind)
	} else {
		fmt.Fprintf(b, "Write your %s artifact, in markdown, to exactly this file: %s\n", kind, path)
	}
	b.WriteString("\nEnd it with a line `Confidence: N` (0-100): how sure you are of it. If you need a person to decide something, add a line `HUMAN INPUT NEEDED`, then `Question: …`, then the options as a list; the work waits for the answer.\n")
	if kind == agentout.KindTaskSplit {
		b.WriteString("\nList the tasks in a ```json block: {\"tasks\": [{\"title\", \"description\", \"executionOrder\", \"dependsOn\": []}]}.\n")
	}
}

// refiningVisits counts the visits of the item's refining steps.
func (k *Kind) refiningVisits(ctx context.Context, itemRun string) (int, error) {
	cfg := k.opts.Workspace.Config
	states := cfg.StateSteps(cfg.Backlog.Pipeline)
	srs, err := k.opts.Store.StepRuns(ctx, agentrunner.StepRunFilter{RunID: itemRun})
	if err != nil {
		return 0, agentrunner.Fail(agentrunner.ClassInternal, "read the step runs of %s: %w", itemRun, err)
	}
	n := 0
	for _, sr := range srs {
		if isRefining(states[sr.Step]) {
			n++
		}
	}
	return n, nil
}

// artifacts lists the typed artifacts of the item's run and, for a task,
// of the task's run, oldest first.
func (k *Kind) artifacts(ctx context.Context, sub *subject) ([]taskprompt.Artifact, error) {
	var out []taskprompt.Artifact
	for i, id := range sub.runs {
		owner := taskprompt.OwnerItem
		if i > 0 {
			owner = taskprompt.OwnerTask
		}
		arts, err := k.runArtifacts(ctx, id, owner)
		if err != nil {
			return nil, err
		}
		out = append(out, arts...)
	}
	return out, nil
}

// runArtifacts lists the typed artifacts of one run.
func (k *Kind) runArtifacts(ctx context.Context, runID string, owner taskprompt.Owner) ([]taskprompt.Artifact, error) {
	run, err := k.opts.Store.Run(ctx, runID)
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "read run %s: %w", runID, err)
	}
	files, err := k.opts.Store.Files(ctx, agentrunner.FileFilter{RunID: runID, Kind: agentrunner.FileArtifact})
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "read the artifacts of %s: %w", runID, err)
	}
	states := k.opts.Workspace.Config.StateSteps(run.Pipeline)
	var out []taskprompt.Artifact
	for _, f := range files {
		kind := agentout.Kind(strings.TrimSuffix(f.Name, ".md"))
		if !strings.HasSuffix(f.Name, ".md") || !kind.Valid() {
			continue
		}
		step := states[f.Step]
		if step == "" {
			step = f.Step
		}
		out = append(out, taskprompt.Artifact{Kind: kind, Step: step, Owner: owner, Content: strings.TrimSpace(string(f.Data))})
	}
	return out, nil
}

// answers are the operators' answers to the gates of this step's earlier
// visits in this run: decisions that routed the step to itself.
func (k *Kind) answers(ctx context.Context, a *agentrunner.StepAttempt) ([]answer, error) {
	srs, err := k.opts.Store.StepRuns(ctx, agentrunner.StepRunFilter{RunID: a.Run.ID})
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "read the step runs of %s: %w", a.Run.ID, err)
	}
	var out []answer
	for _, sr := range srs {
		d := sr.Decision
		if sr.Step != a.Step.ID || sr.Visit >= a.StepRun.Visit || d == nil || d.Action != agentrunner.DecisionRoute || d.To != a.Step.ID {
			continue
		}
		q, err := k.question(ctx, a, sr.Visit)
		if err != nil {
			return nil, err
		}
		out = append(out, answer{visit: sr.Visit, question: q, response: d.Comment, operator: d.Operator})
	}
	return out, nil
}

// question is what the output of an earlier visit asked, or why it
// waited when it asked nothing.
func (k *Kind) question(ctx context.Context, a *agentrunner.StepAttempt, visit int) (string, error) {
	files, err := k.opts.Store.Files(ctx, agentrunner.FileFilter{RunID: a.Run.ID, Kind: agentrunner.FileArtifact, Step: a.Step.ID})
	if err != nil {
		return "", agentrunner.Fail(agentrunner.ClassInternal, "read the artifacts of %s: %w", a.Run.ID, err)
	}
	for i := len(files) - 1; i >= 0; i-- {
		if files[i].Visit != visit {
			continue
		}
		art, err := agentout.Parse(agentout.Kind(strings.TrimSuffix(files[i].Name, ".md")), files[i].Data)
		if err == nil && art.HumanInput != nil {
			return art.HumanInput.Question, nil
		}
		if err == nil && art.Confidence >= 0 {
			return fmt.Sprintf("(none asked: the output was %d%% confident)", art.Confidence), nil
		}
	}
	return "(none asked)", nil
}
