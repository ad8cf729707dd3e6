// Package fake serves the OpenAI Chat Completions and the Anthropic
// Messages wire formats on 127.0.0.1, scripted per test, so the real
// adapters (and the SDKs under them) run unchanged in tests. StartOpenAI
// serves the OpenAI format outside tests too, for offline demos. Nothing
// here calls a real provider.
package fake
