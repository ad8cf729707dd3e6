package route

import (
	"testing"

	"github.com/agentrunner/agentrunner"
)

func TestPointer(t *testing.T) {
	ptr := func(p string) agentrunner.LabelSource { return agentrunner.LabelSource{Pointer: p} }
	review := `{
  "summary": "two nits",
  "verdict": "APPROVE",
  "score": 2.50,
  "blocking": false,
  "reviews": [{"by": "alice", "verdict": "**REJECT**"}, {"by": "bob", "verdict": "APPROVE"}],
  "a/b": {"m~n": "escaped"},
  "notes": {},
  "details": {"lines": 3},
  "none": null,
  "blank": "  "
}`
	runLabelCases(t, []labelCase{
		{"string", ptr("/verdict"), review, result{Label: "APPROVE"}},
		{"number as written", ptr("/score"), review, result{Label: "2.50"}},
		{"boolean", ptr("/blocking"), review, result{Label: "false"}},
		{"array item, emphasis trimmed", ptr("/reviews/0/verdict"), review, result{Label: "REJECT"}},
		{"second item", ptr("/reviews/1/verdict"), review, result{Label: "APPROVE"}},
		{"escaped tokens", ptr("/a~1b/m~0n"), review, result{Label: "escaped"}},
		{"last of duplicate members", ptr("/verdict"), `{"verdict": "REJECT", "verdict": "APPROVE"}`, result{Label: "APPROVE"}},
		{"no member", ptr("/verdict"), `{"b": 1, "a": 2}`,
			failed(`JSON pointer /verdict: no such member; the document has members "a", "b"`)},
		{"no nested member", ptr("/details/verdict"), review,
			failed(`JSON pointer /details/verdict: no such member; /details has members "lines"`)},
		{"empty object", ptr("/notes/verdict"), review,
			failed(`JSON pointer /notes/verdict: no such member; /notes is an empty object`)},
		{"many members", ptr("/v"), `{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1,"j":1,"k":1,"l":1}`,
			failed(`JSON pointer /v: no such member; the document has members "a", "b", "c", "d", "e", "f", "g", "h", "i", "j" and 2 more`)},
		{"item out of range", ptr("/reviews/2/verdict"), review,
			failed(`JSON pointer /reviews/2/verdict: no such item; /reviews is an array of 2 items`)},
		{"leading zero", ptr("/reviews/01"), review,
			failed(`JSON pointer /reviews/01: /reviews is an array, and "01" is not an index`)},
		{"past the end", ptr("/reviews/-"), review,
			failed(`JSON pointer /reviews/-: /reviews is an array, and "-" is not an index`)},
		{"through a string", ptr("/summary/text"), review,
			failed(`JSON pointer /summary/text: /summary is a string, not an object or an array`)},
		{"document is an array", ptr("/verdict"), `["APPROVE"]`,
			failed(`JSON pointer /verdict: the document is an array, and "verdict" is not an index`)},
		{"document is a string", ptr("/verdict"), `"APPROVE"`,
			failed(`JSON pointer /verdict: the document is a string, not an object or an array`)},
		{"object value", ptr("/details"), review,
			failed(`JSON pointer /details: the value is an object; a label is a string, a number or a boolean`)},
		{"array value", ptr("/reviews"), review,
			failed(`JSON pointer /reviews: the value is an array; a label is a string, a number or a boolean`)},
		{"null value", ptr("/none"), review,
			failed(`JSON pointer /none: the value is null; a label is a string, a number or a boolean`)},
		{"blank value", ptr("/blank"), review,
			failed(`the label read from the JSON pointer /blank is empty`)},
		{"not JSON", ptr("/verdict"), "Verdict: APPROVE\n",
			failed(`JSON pointer /verdict: the output is not JSON: line 1: invalid character 'V' looking for beginning of value`)},
		{"syntax error on line 3", ptr("/verdict"), "{\n  \"a\": 1,\n  \"verdict\" \"x\"\n}",
			failed(`JSON pointer /verdict: the output is not JSON: line 3: invalid character '"' after object key`)},
		{"cut short", ptr("/verdict"), `{"verdict": "APPROVE"`,
			failed(`JSON pointer /verdict: the output is not JSON: the JSON value is cut short`)},
		{"empty output", ptr("/verdict"), " \n",
			failed(`JSON pointer /verdict: the output is not JSON: it is empty`)},
		{"data after the value", ptr("/verdict"), "{\"verdict\": \"APPROVE\"}\n{\"verdict\": \"REJECT\"}",
			failed(`JSON pointer /verdict: the output is not JSON: line 2: data after the JSON value`)},
	})
}
