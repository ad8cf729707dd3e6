package sqlite

import (
	"context"

	"github.com/agentrunner/agentrunner"
)

// sqlRunTotals counts every run by pipeline and status on the covering
// index runs_pipeline_status: no run row is read.
const sqlRunTotals = `SELECT pipeline, status, COUNT(*) FROM runs INDEXED BY runs_pipeline_status
	GROUP BY pipeline, status ORDER BY pipeline, status`

// RunTotals counts every run the store holds, by pipeline and status,
// ordered by both. Metrics read it at each scrape, so counts of ended runs
// go on from where they were after a restart instead of from 0.
func (s *Store) RunTotals(ctx context.Context) ([]agentrunner.RunCount, error) {
	rows, err := s.read.QueryContext(ctx, sqlRunTotals)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []agentrunner.RunCount
	for rows.Next() {
		var c agentrunner.RunCount
		if err := rows.Scan(&c.Pipeline, &c.Status, &c.N); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
