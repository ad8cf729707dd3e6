package dashboard

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
)

// Bounds of an action's fields, the API's own.
const (
	maxReason  = 1024
	maxComment = 4096
	maxMessage = 16 << 10
)

// action is one thing an operator can do from the dashboard. Each is
// sent to the API route that does it, as the signed-in operator, so it is
// checked and audited as a call of the API or the CLI would be.
type action struct {
	Name  string
	Title string
	// Need is the role the API route needs; the dashboard offers the
	// action to that role and above, and the API checks it again.
	Need string
	// Run and Step: the action is about a run (and a gate step of it).
	Run, Step bool
	// Fields are the form fields the confirmation asks for.
	Reason, Comment, Message, Agent, To bool
	// CommentRequired: an answer must say something.
	CommentRequired bool
	// Danger marks an action that stops work (abort, reject).
	Danger bool
}

// actions are the dashboard's actions by name.
var actions = map[string]action{
	"pause":       {Name: "pause", Title: "Pause the loop", Need: config.RoleOperator, Reason: true},
	"resume":      {Name: "resume", Title: "Resume the loop", Need: config.RoleOperator, Reason: true},
	"abort":       {Name: "abort", Title: "Abort the loop's running cycle", Need: config.RoleOperator, Reason: true, Danger: true},
	"force-cycle": {Name: "force-cycle", Title: "Start a cycle now", Need: config.RoleOperator, Reason: true},
	"inject":      {Name: "inject", Title: "Put a message into an agent's mailbox", Need: config.RoleOperator, Agent: true, Message: true},
	"reload":      {Name: "reload", Title: "Reload the configuration", Need: config.RoleAdmin, Reason: true},
	"run-abort":   {Name: "run-abort", Title: "Abort the run", Need: config.RoleOperator, Run: true, Reason: true, Danger: true},
	"run-resume":  {Name: "run-resume", Title: "Resume the halted run", Need: config.RoleOperator, Run: true, Reason: true},
	"approve":     {Name: "approve", Title: "Approve the gate", Need: config.RoleOperator, Run: true, Step: true, Comment: true},
	"reject":      {Name: "reject", Title: "Reject the gate", Need: config.RoleOperator, Run: true, Step: true, Comment: true, Danger: true},
	"route":       {Name: "route", Title: "Send the run to another step", Need: config.RoleOperator, Run: true, Step: true, Comment: true, To: true},
	"answer":      {Name: "answer", Title: "Answer the agent's question", Need: config.RoleOperator, Run: true, Step: true, Comment: true, CommentRequired: true},
}

// confirmView is the confirmation page's data: the action and what it is
// about, and the choices its fields offer.
type confirmView struct {
	Action action
	Run    string
	Step   string
	Agents []string
	Steps  []string
	Back   string
}

// target is an action's run and step, read and checked from a form or a
// query.
type target struct {
	Run, Step string
}

// readTarget checks the action's run and step parameters.
func (d *Dashboard) readTarget(a action, q url.Values) (target, error) {
	t := target{Run: q.Get("run"), Step: q.Get("step")}
	if a.Run && !runIDPattern.MatchString(t.Run) {
		return t, errorf(agentrunner.EINVALID, "run: want a run id")
	}
	if a.Step && !stepIDPattern.MatchString(t.Step) {
		return t, errorf(agentrunner.EINVALID, "step: want a step's name")
	}
	if !a.Run {
		t.Run = ""
	}
	if !a.Step {
		t.Step = ""
	}
	return t, nil
}

// actionOf finds the named action and checks the session may take it.
func actionOf(name string, s *session) (action, error) {
	a, ok := actions[name]
	if !ok {
		return a, errorf(agentrunner.ENOTFOUND, "no action %q", clipText(32, name))
	}
	if !s.may(a.Need) {
		return a, errorf(agentrunner.EFORBIDDEN, "your role %s may not %s; it needs role %s or higher", s.Role, strings.ToLower(a.Title), a.Need)
	}
	return a, nil
}

// handleConfirm shows what an action will do, with its fields and a
// confirm button: every action takes two deliberate steps, and works
// without scripts.
func (d *Dashboard) handleConfirm(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	a, err := actionOf(q.Get("action"), s)
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	t, err := d.readTarget(a, q)
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	v := confirmView{Action: a, Run: t.Run, Step: t.Step, Back: backOf(t), Agents: slices.Sorted(maps.Keys(d.config().Agents))}
	if a.To {
		ctx, cancel := pageContext(r)
		defer cancel()
		run, err := d.runOf(ctx, t.Run)
		if err != nil {
			d.fail(w, r, s, err)
			return
		}
		if p := d.runPipeline(run); p != nil {
			v.Steps = append(slices.Sorted(maps.Keys(p.Steps)), agentrunner.EndStep)
		}
	}
	d.render(w, r, s, http.StatusOK, "confirm", a.Title, v)
}

// backOf is the page to go back to after an action.
func backOf(t target) string {
	if t.Run != "" {
		return "/runs/" + url.PathEscape(t.Run)
	}
	return "/"
}

// resultView is the page after an action.
type resultView struct {
	Action  action
	Command *arhttp.Command
	Back    string
}

// handleAct takes a confirmed action: it checks the form's CSRF token and
// the role, then sends the action to the API's route as the signed-in
// operator, and shows the command the API wrote (or its refusal).
func (d *Dashboard) handleAct(w http.ResponseWriter, r *http.Request, s *session) {
	if !d.checkForm(w, r, s) {
		return
	}
	a, err := actionOf(r.PostForm.Get("action"), s)
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	t, err := d.readTarget(a, r.PostForm)
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	method, path, body, err := d.request(a, t, r.PostForm)
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	ctx, cancel := pageContext(r)
	defer cancel()
	ans, err := d.call(ctx, s, method, path, body)
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	var out struct {
		Command *arhttp.Command `json:"command"`
	}
	if err := json.Unmarshal(ans.Body, &out); err != nil {
		d.fail(w, r, s, fmtErr("decode the API's answer", err))
		return
	}
	d.render(w, r, s, http.StatusOK, "result", a.Title, resultView{Action: a, Command: out.Command, Back: backOf(t)})
}

// request builds the API request of an action from its form.
func (d *Dashboard) request(a action, t target, f url.Values) (method, path string, body map[string]any, err error) {
	body = map[string]any{}
	if a.Reason {
		reason := strings.TrimSpace(f.Get("reason"))
		if len(reason) > maxReason {
			return "", "", nil, errorf(agentrunner.EINVALID, "the reason is %d bytes; at most %d", len(reason), maxReason)
		}
		if reason != "" {
			body["reason"] = reason
		}
	}
	run := url.PathEscape(t.Run)
	switch a.Name {
	case "pause", "resume", "abort", "force-cycle":
		return http.MethodPost, "/api/override/" + a.Name, body, nil
	case "inject":
		agent, msg := f.Get("agent"), f.Get("message")
		if d.config().Agents[agent] == nil {
			return "", "", nil, errorf(agentrunner.EINVALID, "agent: choose one of the agents")
		}
		if strings.TrimSpace(msg) == "" || len(msg) > maxMessage {
			return "", "", nil, errorf(agentrunner.EINVALID, "message: write a message of at most %d bytes", maxMessage)
		}
		return http.MethodPost, "/api/override/inject", map[string]any{"agent": agent, "message": msg}, nil
	case "reload":
		return http.MethodPost, "/api/admin/reload", body, nil
	case "run-abort":
		return http.MethodPost, "/api/runs/" + run + "/abort", body, nil
	case "run-resume":
		return http.MethodPost, "/api/runs/" + run + "/resume", body, nil
	}
	return d.decision(a, t, f)
}

// decision builds a gate decision: approve, reject, route to a step, or
// answer (a state step's question: route to itself with the answer as
// the comment, which its agent reads when it runs again).
func (d *Dashboard) decision(a action, t target, f url.Values) (method, path string, body map[string]any, err error) {
	comment := strings.TrimSpace(f.Get("comment"))
	switch {
	case len(comment) > maxComment:
		return "", "", nil, errorf(agentrunner.EINVALID, "the comment is %d bytes; at most %d", len(comment), maxComment)
	case a.CommentRequired && comment == "":
		return "", "", nil, errorf(agentrunner.EINVALID, "write the answer")
	}
	body = map[string]any{"decision": a.Name}
	switch a.Name {
	case "route":
		to := f.Get("to")
		if !stepIDPattern.MatchString(to) {
			return "", "", nil, errorf(agentrunner.EINVALID, "to: choose the step to send the run to")
		}
		body["to"] = to
	case "answer":
		body["decision"], body["to"] = string(agentrunner.DecisionRoute), t.Step
	}
	if comment != "" {
		body["comment"] = comment
	}
	return http.MethodPost, "/api/runs/" + url.PathEscape(t.Run) + "/gates/" + url.PathEscape(t.Step), body, nil
}
