package cron_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/cron"
	"github.com/google/go-cmp/cmp"
)

// fires lists the first n fire times after from, in UTC.
func fires(t *testing.T, expr, zone, from string, n int) []string {
	t.Helper()
	loc, err := cron.Location(zone)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cron.Parse(expr, loc)
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(time.RFC3339, from)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for range n {
		at = s.Next(at)
		out = append(out, at.UTC().Format(time.RFC3339))
	}
	return out
}

func TestEachKindOfExpressionFiresAtItsTimesInItsZone(t *testing.T) {
	tests := []struct {
		name, expr, zone, from string
		want                   []string
	}{
		{"daily at midnight", "0 0 * * *", "UTC", "2026-03-14T09:26:53Z",
			[]string{"2026-03-15T00:00:00Z", "2026-03-16T00:00:00Z", "2026-03-17T00:00:00Z"}},
		{"steps, ranges and day names", "*/15 9-10 * * mon-fri", "UTC", "2026-03-13T10:40:00Z", // a Friday
			[]string{"2026-03-13T10:45:00Z", "2026-03-16T09:00:00Z", "2026-03-16T09:15:00Z"}},
		{"lists and month names", "0 6,18 1 jan,jul *", "UTC", "2026-03-14T09:26:53Z",
			[]string{"2026-07-01T06:00:00Z", "2026-07-01T18:00:00Z", "2027-01-01T06:00:00Z"}},
		{"@daily in Berlin (CET, UTC+1)", "@daily", "Europe/Berlin", "2026-03-14T09:26:53Z",
			[]string{"2026-03-14T23:00:00Z", "2026-03-15T23:00:00Z"}},
		{"@midnight is @daily", "@midnight", "UTC", "2026-03-14T09:26:53Z",
			[]string{"2026-03-15T00:00:00Z"}},
		{"@weekly: Sunday midnight in Tokyo (UTC+9)", "@weekly", "Asia/Tokyo", "2026-03-14T09:26:53Z",
			[]string{"2026-03-14T15:00:00Z", "2026-03-21T15:00:00Z"}},
		{"@monthly in New York (EDT, UTC-4)", "@monthly", "America/New_York", "2026-03-14T09:26:53Z",
			[]string{"2026-04-01T04:00:00Z", "2026-05-01T04:00:00Z"}},
		{"@hourly", "@hourly", "UTC", "2026-03-14T09:26:53Z",
			[]string{"2026-03-14T10:00:00Z", "2026-03-14T11:00:00Z"}},
		{"@yearly", "@yearly", "UTC", "2026-03-14T09:26:53Z",
			[]string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
		{"@annually is @yearly", "@annually", "UTC", "2026-03-14T09:26:53Z",
			[]string{"2027-01-01T00:00:00Z"}},
		// New York goes from 02:00 EST to 03:00 EDT on 8 March 2026
		// (07:00 UTC): 02:30 does not exist that day.
		{"a fixed time clocks skip fires at the change", "30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}},
		{"an hourly schedule keeps to real time when clocks go forward", "30 * * * *", "America/New_York", "2026-03-08T06:00:00Z",
			[]string{"2026-03-08T06:30:00Z", "2026-03-08T07:30:00Z", "2026-03-08T08:30:00Z"}},
		// New York goes back from 02:00 EDT to 01:00 EST on 1 November
		// 2026 (06:00 UTC): 01:30 happens twice that day.
		{"a fixed time clocks repeat fires once", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z", "2026-11-03T06:30:00Z"}},
		{"an hourly schedule fires in both passes of a repeated hour", "30 * * * *", "America/New_York", "2026-11-01T05:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:30:00Z"}},
		// Berlin: 02:00 CET becomes 03:00 CEST on 29 March 2026 (01:00
		// UTC), and 03:00 CEST goes back to 02:00 CET on 25 October.
		{"Berlin, clocks forward", "15 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:15:00Z"}},
		{"Berlin, clocks back", "0 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-26T01:00:00Z"}},
		{"midnight keeps to the wall clock across a change", "0 0 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z",
			[]string{"2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, fires(t, tt.expr, tt.zone, tt.from, len(tt.want))); diff != "" {
				t.Errorf("%s in %s after %s (-want +got):\n%s", tt.expr, tt.zone, tt.from, diff)
			}
		})
	}
}

func TestNextKeepsTheCallersLocation(t *testing.T) {
	s, err := cron.Parse("0 0 * * *", mustLocation(t, "Europe/Berlin"))
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	if got := s.Next(from); got.Location() != time.UTC || !got.Equal(time.Date(2026, 3, 14, 23, 0, 0, 0, time.UTC)) {
		t.Errorf("Next = %v, want 2026-03-14 23:00 UTC in UTC", got)
	}
	if got, want := s.String(), "0 0 * * * (Europe/Berlin)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestParseRefusesWhatIsNotAFiveFieldExpression(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"", "the cron expression is empty"},
		{"61 * * * *", `invalid cron expression "61 * * * *": end of range (61) above maximum (59)`},
		{"0 0 * *", `invalid cron expression "0 0 * *": expected exactly 5 fields`},
		{"0 0 0 * * *", "has six fields: there is no seconds field"},
		{"@every 1h", "write every: with a duration (every: 1h) instead of @every"},
		{"CRON_TZ=UTC 0 * * * *", "names its time zone: give it with timezone: instead"},
		{"TZ=UTC 0 * * * *", "names its time zone"},
		{"@fortnightly", `invalid cron expression "@fortnightly": unrecognized descriptor`},
		{"0 0 31 2 *", "never fires"},
		{"0 0 * * funday", `invalid cron expression "0 0 * * funday"`},
	}
	for _, tt := range tests {
		_, err := cron.Parse(tt.expr, time.UTC)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tt.expr, err, tt.want)
			continue
		}
		if agentrunner.ErrorCode(err) != agentrunner.EINVALID {
			t.Errorf("Parse(%q): code %q, want %q", tt.expr, agentrunner.ErrorCode(err), agentrunner.EINVALID)
		}
	}
}

func TestLocationTakesIANANamesOnly(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"UTC", true}, {"Europe/Berlin", true}, {"America/New_York", true},
		{"Mars/Olympus_Mons", false}, {"Local", false}, {"", false},
	}
	for _, tt := range tests {
		_, err := cron.Location(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("Location(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

func TestShortestGapSeesADaylightSavingChange(t *testing.T) {
	tests := []struct {
		expr, zone string
		want       time.Duration
	}{
		{"*/15 * * * *", "UTC", 15 * time.Minute},
		{"0 0 * * *", "UTC", 24 * time.Hour},
		{"0 0 * * *", "America/New_York", 23 * time.Hour}, // 8 March is 23 hours long
		{"0 9 * * mon-fri", "UTC", 24 * time.Hour},
	}
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		s, err := cron.Parse(tt.expr, mustLocation(t, tt.zone))
		if err != nil {
			t.Fatal(err)
		}
		if got := s.ShortestGap(from, 40); got != tt.want {
			t.Errorf("ShortestGap(%s in %s) = %s, want %s", tt.expr, tt.zone, got, tt.want)
		}
	}
}

func mustLocation(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := cron.Location(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
