package repoctx_test

import (
	"context"
	"fmt"

	"github.com/agentrunner/agentrunner/repoctx"
)

func ExampleDetect() {
	c, err := repoctx.Detect(context.Background(), "testdata/django")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Language, c.Framework, c.Languages, c.Markers)
	// Output: python django map[javascript:1 python:3] [requirements.txt]
}
