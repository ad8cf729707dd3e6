package artifact

// For the external tests, which use packages that import this one.
var (
	FastPathDiff    = fastPathDiff
	CorpusContracts = corpusContracts
	Corpus          = corpus
)
