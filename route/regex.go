package route

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"

	"github.com/agentrunner/agentrunner"
)

// regex reads the first match of a regular expression: its first capture
// group when it has one, else the whole match.
type regex struct{ re *regexp.Regexp }

func compileRegex(expr string) (*Extractor, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "label regex %q: %s", expr, regexProblem(err))
	}
	return &Extractor{desc: fmt.Sprintf("the regular expression %q", expr), read: (&regex{re: re}).read}, nil
}

// regexProblem says what is wrong and where, without repeating the
// "error parsing regexp" preamble of the syntax error.
func regexProblem(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return fmt.Sprintf("%s at %q", se.Code, se.Expr)
	}
	return err.Error()
}

func (r *regex) read(output []byte) (string, error) {
	m := r.re.FindSubmatchIndex(output)
	switch {
	case m == nil:
		return "", invalid("the output does not match the regular expression %q", r.re.String())
	case r.re.NumSubexp() == 0:
		return string(output[m[0]:m[1]]), nil
	case m[2] < 0:
		return "", invalid("the regular expression %q matched on line %d, but its first group took no part in the match", r.re.String(), line(output, m[0]))
	}
	return string(output[m[2]:m[3]]), nil
}
