// Package taskprompt fills in the template variables of an agent's prompt
// (spec 5's IPromptBuilder): {task.title}, {artifacts.plan} and the others
// are replaced by what is known of the backlog item, the task, the
// repository and the artifacts earlier agents produced. Check validates a
// prompt when its configuration is loaded, so that a typo fails at start
// and not as an empty line in a model's prompt; Build checks and fills it
// in for one run.
//
// # Variables
//
// A variable is a name between braces, {name} or {namespace.name}, each
// part an ASCII letter followed by ASCII letters, digits and underscores.
// Nothing else with braces is a variable, so prompts can hold JSON examples
// ({"tasks": [...]}), code (func() {}, { a: 1 }, {}) and quantifiers
// ({2,3}) as they are.
//
//	{task.title}                      the task's title
//	{task.description}                its description
//	{task.state}                      its current pipeline state
//	{task.priority}                   its priority
//	{task.acceptanceCriteria}         its acceptance criteria
//	{task.executionOrder}             its order within the backlog item
//	{backlogItem.title}               the backlog item's title
//	{backlogItem.description}         its description
//	{backlogItem.acceptanceCriteria}  its acceptance criteria
//	{backlogItem.refiningIterations}  how many refining iterations it had
//	{context.language}                the repository's detected language
//	{context.framework}               its detected framework
//	{context.repoPath}                the repository's path
//	{artifacts}                       every earlier artifact, oldest first
//	{artifacts.split}                 the most recent task_split artifact
//	{artifacts.plan}                  the most recent plan artifact
//	{artifacts.implementation}        the most recent implementation artifact
//	{artifacts.test}                  the most recent test artifact
//	{artifacts.general}               the most recent general artifact
//
// {artifacts.test} and {artifacts.general} extend spec 5's tables: they
// give the two artifact kinds the spec lists without a variable one each,
// so that every kind an agent can produce can be read back.
//
// # Scopes
//
// A backlog item agent (backlog_state in its YAML) works on a backlog item
// that has no task yet, so any {task.…} variable in its prompt is an error,
// known name or not. A task agent (state) may use every variable. Spec 5
// lists fewer variables for each than this: a backlog item agent may also
// use {context.…} and {artifacts…} (the item has a repository and the split
// agent's artifact), and a task agent every {backlogItem.…} field, because
// each has that information and nothing is gained by refusing it.
//
// # Values
//
// A value goes in as it is, with its leading blank lines and trailing white
// space removed so that it fits the line the template gives it; it is never
// read for variables again (agents' outputs are untrusted, and a plan
// quoting {task.title} keeps it as text).
//
// A field the user left blank (a task without a description) is the empty
// string: the prompt says what the field is, and an invented placeholder
// could be read as the field's text. {task.executionOrder} is empty when
// the order is not set (orders start at 1); {backlogItem.refiningIterations}
// is always a number, 0 included.
//
// An artifact variable is never empty: it is None, "(none)", when no
// artifact of the kind exists yet ({artifacts.plan} in the planning agent's
// first run, {artifacts} before any), and Empty, "(empty)", when the most
// recent one has no content, so that a model is not left to guess what a
// heading with nothing under it means.
//
// {artifacts} lists the artifacts oldest first, each as a markdown heading
// with its kind and the state or step that produced it, then its content:
//
//	### plan from Planning, for this task
//
//	…the plan…
//
// For a task agent the heading also says whose artifact it is, "for the
// backlog item" or "for this task"; a backlog item agent's are all the
// item's. Artifacts are separated by a blank line.
//
// # Braces that are text
//
// A variable written in doubled braces, {{name}}, is not a variable: it is
// copied as written, so Angular, Mustache, Jinja and Handlebars examples
// such as <h1>{{title}}</h1> reach the model unchanged. To write a
// variable's name itself in single braces, put a backslash before it:
// \{task.title} becomes {task.title}, and a shell's ${HOME} is written
// $\{HOME}. The backslash is dropped only there; everywhere else a
// backslash is text (\d{2,3} stays as it is). There is no escape for the
// backslash itself: \\{task.title} becomes \{task.title}, so a value cannot
// follow a backslash directly. Any other {{ and }} is text too; they are
// not escapes, as a prompt quoting code or a template means them as
// written.
//
// # Errors
//
// Check reports every problem of a template at once, as Problems, each with
// the line and column of its variable in the template (both from 1; the
// column counts characters): an unknown variable, with the nearest known
// name when one is close ({task.titel}, did you mean {task.title}?), and a
// variable the scope does not have.
package taskprompt
