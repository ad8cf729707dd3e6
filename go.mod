module github.com/agentrunner/agentrunner

go 1.26.0
