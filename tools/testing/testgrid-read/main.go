// Command testgrid-read runs TestGrid's own updater (github.com/GoogleCloudPlatform/testgrid,
// pkg/updater) for ONE test group against a GCS bucket (real or, through STORAGE_EMULATOR_HOST, an
// emulator such as fake-gcs-server), then reads back the grid state the updater wrote and prints it
// as JSON on stdout. What it prints is what TestGrid would show for that test group.
//
// What runs, in order (the same path as TestGrid's cmd/updater with --confirm):
//  1. The test group config is built from the flags (or read from --config-yaml, with the defaults
//     of --config-defaults, by TestGrid's config/yamlcfg and checked with config.Validate) and uploaded as a Configuration proto to
//     gs://<state bucket>/<state dir>/config.
//  2. updater.Update(client, updater.GCS(...), {ConfigPath, GridPrefix: "grid", GroupNames: [name],
//     Write: true, Freq: 0}) lists the builds under gcs_prefix, reads started.json, finished.json,
//     podinfo.json and the junit files, and writes the zlib-compressed state.Grid proto to
//     gs://<state bucket>/<state dir>/grid/<name>. Like the real updater it starts from the grid
//     state already there (incremental), unless --fresh.
//  3. gcs.DownloadGrid reads that object back and updater.InflateGrid decodes the run-length
//     encoded rows into one cell per column.
//
// Output (stdout, one JSON object):
//
//	{
//	  "name": "<test group name>",
//	  "columns": [                        // newest first, as TestGrid orders them
//	    {"build": "<build id>",           // Column.build (the build directory name)
//	     "name": "",                      // Column.name (empty for GCS results)
//	     "started_ms": 1700000000000,     // Column.started, epoch milliseconds
//	     "extra": ["v1.37.1", "abc"],     // Column.extra, one per --column-header, in order
//	     "hint": "<build id>"}            // Column.hint
//	  ],
//	  "rows": [                           // in TestGrid's (natural) name order
//	    {"name": "<row name>",            // e.g. "<suite>.<testcase>" or "<job>.Overall"
//	     "id": "<row id>",
//	     "results": ["PASS", "FAIL"],     // one per column: TestStatus names (NO_RESULT where absent)
//	     "messages": ["", "boom"],        // one per column ("" where absent)
//	     "icons": ["", "F"],              // one per column ("" where absent)
//	     "alert": null}                   // or {"fail_count", "fail_build_id", "latest_fail_build_id",
//	                                      //     "pass_build_id", "failure_message"} (num_failures_to_alert)
//	  ]
//	}
//
// With --junit FILE no GCS is needed: the updater runs against an in-memory bucket (memgcs.go)
// holding one finished, passed build of a job named "junit" (gcs_prefix junit/logs/junit, build
// "1", started now) whose only artifact is FILE, as artifacts/junit_01.xml. The test group is
// built from the flags as usual (disable_prowjob_analysis is forced, so there is no Pod row;
// --disable-merged-status applies), and the output gains one field:
//
//	"testcases": [                      // what TestGrid's metadata/junit Parse returns for FILE,
//	  {"name": "<suite>.<testcase>",     // one per <testcase> in document order, suites flattened
//	   "classname": "...",               // and named as the updater's flattenResults names them
//	   "error": false, "failure": true,  // which of <error>, <failure>, <skipped> it holds
//	   "skipped": false, "skipped_message": "", "skipped_text": ""}
//	]
//
// Logs (TestGrid's logrus output) go to stderr. Exit status 1 with a one-line reason first on
// any failure, including a failed group update (which updater.Update itself only logs).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/GoogleCloudPlatform/testgrid/config"
	"github.com/GoogleCloudPlatform/testgrid/config/yamlcfg"
	"github.com/GoogleCloudPlatform/testgrid/metadata/junit"
	configpb "github.com/GoogleCloudPlatform/testgrid/pb/config"
	statepb "github.com/GoogleCloudPlatform/testgrid/pb/state"
	statuspb "github.com/GoogleCloudPlatform/testgrid/pb/test_status"
	"github.com/GoogleCloudPlatform/testgrid/pkg/updater"
	"github.com/GoogleCloudPlatform/testgrid/util/gcs"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"
)

type strings_ []string

func (s *strings_) String() string     { return strings.Join(*s, ",") }
func (s *strings_) Set(v string) error { *s = append(*s, v); return nil }

type options struct {
	gcsPrefix              string
	columnHeaders          strings_
	name                   string
	configYAML             string
	configDefaults         string
	daysOfResults          int
	numFailuresToAlert     int
	disableProwjobAnalysis bool
	disableMergedStatus    bool
	junitFile              string
	stateBucket            string
	stateDir               string
	fresh                  bool
	groupTimeout           time.Duration
	buildTimeout           time.Duration
	verbose                bool
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.gcsPrefix, "gcs-prefix", "", "TestGrid gcs_prefix of the test group: bucket/logs/<job> (no gs://)")
	flag.Var(&o.columnHeaders, "column-header", "column_header configuration_value (repeatable, in order)")
	flag.StringVar(&o.name, "name", "", "test group name (default: the last element of --gcs-prefix; with --config-yaml: the group to update, required if it has several)")
	flag.StringVar(&o.configYAML, "config-yaml", "", "TestGrid YAML config (test_groups, dashboards, ...) to use instead of --gcs-prefix/--column-header; converted with TestGrid's yamlcfg and checked with config.Validate")
	flag.StringVar(&o.configDefaults, "config-defaults", "", "TestGrid default.yaml (default_test_group, default_dashboard_tab) for --config-yaml; without it: days_of_results 14, num_columns_recent 10 (as kubernetes/test-infra's)")
	flag.IntVar(&o.daysOfResults, "days-of-results", 0, "if > 0, override the group's days_of_results (TestGrid's default is 7: older builds become an UNKNOWN \"build too old\" column)")
	flag.IntVar(&o.numFailuresToAlert, "num-failures-to-alert", 0, "num_failures_to_alert of the group built from flags")
	flag.BoolVar(&o.disableProwjobAnalysis, "disable-prowjob-analysis", false, "disable_prowjob_analysis of the group built from flags (drops the <job>.Pod row)")
	flag.BoolVar(&o.disableMergedStatus, "disable-merged-status", false, "disable_merged_status of the group built from flags: same-named rows of a build are kept apart as name, name [1], ... instead of merged into one (possibly FLAKY) row")
	flag.StringVar(&o.junitFile, "junit", "", "read this one JUnit file as the only artifact of one build, in an in-memory bucket (no GCS needed); see the package docs")
	flag.StringVar(&o.stateBucket, "state-bucket", "", "bucket for the config and grid state (default: the bucket of the gcs prefix)")
	flag.StringVar(&o.stateDir, "state-dir", "testgrid-read", "folder in --state-bucket for the config and grid state")
	flag.BoolVar(&o.fresh, "fresh", false, "delete the group's grid state first instead of updating it incrementally")
	flag.DurationVar(&o.groupTimeout, "group-timeout", 5*time.Minute, "updater group timeout")
	flag.DurationVar(&o.buildTimeout, "build-timeout", 2*time.Minute, "updater build timeout")
	flag.BoolVar(&o.verbose, "verbose", false, "debug logging")
	flag.Parse()
	return o
}

func main() {
	opt := parseFlags()
	logrus.SetOutput(os.Stderr)
	logrus.SetLevel(logrus.InfoLevel)
	if opt.verbose {
		logrus.SetLevel(logrus.DebugLevel)
	}
	out, err := run(context.Background(), opt)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testgrid-read: %v\n", err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintf(os.Stderr, "testgrid-read: writing json: %v\n", err)
		os.Exit(1)
	}
}

// testGroupConfig returns the whole configuration and the group to update.
func testGroupConfig(opt options) (*configpb.Configuration, *configpb.TestGroup, error) {
	var cfg *configpb.Configuration
	if opt.configYAML != "" {
		data, err := os.ReadFile(opt.configYAML)
		if err != nil {
			return nil, nil, fmt.Errorf("reading --config-yaml: %w", err)
		}
		// ReconcileTestGroup also sets use_kubernetes_client and is_external, as TestGrid's
		// configurator does for every YAML test group. config.Validate wants a positive
		// days_of_results and num_columns_recent, which a default.yaml normally supplies.
		defaults := yamlcfg.DefaultConfiguration{
			DefaultTestGroup:    &configpb.TestGroup{DaysOfResults: 14, NumColumnsRecent: 10},
			DefaultDashboardTab: &configpb.DashboardTab{NumColumnsRecent: 10},
		}
		if opt.configDefaults != "" {
			raw, err := os.ReadFile(opt.configDefaults)
			if err != nil {
				return nil, nil, fmt.Errorf("reading --config-defaults: %w", err)
			}
			if defaults, err = yamlcfg.LoadDefaults(raw); err != nil {
				return nil, nil, fmt.Errorf("parsing %s with TestGrid's yamlcfg: %w", opt.configDefaults, err)
			}
		}
		if cfg, err = yamlcfg.Update(nil, data, &defaults, true); err != nil {
			return nil, nil, fmt.Errorf("parsing %s with TestGrid's yamlcfg: %w", opt.configYAML, err)
		}
		if err := config.Validate(cfg); err != nil {
			return nil, nil, fmt.Errorf("TestGrid rejects %s: %w", opt.configYAML, err)
		}
	} else {
		if opt.gcsPrefix == "" {
			return nil, nil, errors.New("--gcs-prefix or --config-yaml is required")
		}
		name := opt.name
		if name == "" {
			name = path.Base(strings.TrimSuffix(opt.gcsPrefix, "/"))
		}
		tg := &configpb.TestGroup{
			Name:                   name,
			GcsPrefix:              opt.gcsPrefix,
			NumFailuresToAlert:     int32(opt.numFailuresToAlert),
			DisableProwjobAnalysis: opt.disableProwjobAnalysis,
			DisableMergedStatus:    opt.disableMergedStatus,
			// What TestGrid's yamlcfg sets on every test group.
			UseKubernetesClient: true,
			IsExternal:          true,
		}
		for _, h := range opt.columnHeaders {
			tg.ColumnHeader = append(tg.ColumnHeader, &configpb.TestGroup_ColumnHeader{ConfigurationValue: h})
		}
		cfg = &configpb.Configuration{TestGroups: []*configpb.TestGroup{tg}}
	}

	var group *configpb.TestGroup
	switch {
	case opt.name != "":
		for _, tg := range cfg.TestGroups {
			if tg.Name == opt.name {
				group = tg
			}
		}
		if group == nil {
			return nil, nil, fmt.Errorf("no test group named %q", opt.name)
		}
	case len(cfg.TestGroups) == 1:
		group = cfg.TestGroups[0]
	default:
		return nil, nil, fmt.Errorf("%d test groups: say which with --name", len(cfg.TestGroups))
	}
	if opt.daysOfResults > 0 {
		group.DaysOfResults = int32(opt.daysOfResults)
	}
	return cfg, group, nil
}

func run(ctx context.Context, opt options) (*gridJSON, error) {
	var junitData []byte
	if opt.junitFile != "" {
		var err error
		if junitData, err = os.ReadFile(opt.junitFile); err != nil {
			return nil, fmt.Errorf("reading --junit: %w", err)
		}
		opt = junitOptions(opt)
	}
	cfg, group, err := testGroupConfig(opt)
	if err != nil {
		return nil, err
	}

	bucket := opt.stateBucket
	if bucket == "" {
		prefix := group.GetGcsPrefix()
		if gc := group.GetResultSource().GetGcsConfig(); gc != nil {
			prefix = gc.GetGcsPrefix()
		}
		bucket = strings.SplitN(strings.TrimSpace(strings.Split(prefix, ",")[0]), "/", 2)[0]
	}
	if bucket == "" {
		return nil, errors.New("no bucket for the grid state: set --state-bucket")
	}
	configPath, err := gcs.NewPath(fmt.Sprintf("gs://%s/%s/config", bucket, strings.Trim(opt.stateDir, "/")))
	if err != nil {
		return nil, fmt.Errorf("config path: %w", err)
	}
	const gridPrefix = "grid"
	gridPath, err := updater.TestGroupPath(*configPath, gridPrefix, group.Name)
	if err != nil {
		return nil, fmt.Errorf("grid path: %w", err)
	}

	var client gcs.ConditionalClient
	var storageClient *storage.Client
	if opt.junitFile != "" {
		client = newMemClient()
	} else {
		// storage.NewClient honours STORAGE_EMULATOR_HOST (and then skips authentication).
		storageClient, err = gcs.ClientWithCreds(ctx)
		if err != nil {
			return nil, fmt.Errorf("storage client: %w", err)
		}
		defer storageClient.Close()
		client = gcs.NewClient(storageClient)
	}

	if opt.fresh && storageClient != nil {
		err := storageClient.Bucket(gridPath.Bucket()).Object(gridPath.Object()).Delete(ctx)
		if err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
			return nil, fmt.Errorf("deleting %s: %w", gridPath, err)
		}
	}

	buf, err := proto.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("marshal config: %w", err)
	}
	if _, err := client.Upload(ctx, *configPath, buf, gcs.DefaultACL, gcs.NoCache); err != nil {
		return nil, fmt.Errorf("uploading config to %s: %w", configPath, err)
	}

	if opt.junitFile != "" {
		if err := seedJunitBuild(ctx, client, junitData); err != nil {
			return nil, err
		}
	}

	poolCtx, cancelPool := context.WithCancel(ctx)
	defer cancelPool()
	const buildConcurrency = 4
	gcsUpdater := updater.GCS(poolCtx, client, opt.groupTimeout, opt.buildTimeout, buildConcurrency, true, false)
	// updater.Update only logs a failed group: keep its outcome to report it.
	var updated, more bool
	var updateErr error
	recording := func(parent context.Context, log logrus.FieldLogger, c gcs.Client, tg *configpb.TestGroup, gp gcs.Path) (bool, error) {
		m, err := gcsUpdater(parent, log, c, tg, gp)
		updated, more, updateErr = true, m, err
		return m, err
	}
	// The updater reads a bounded number of columns per cycle and says whether more remain; a
	// real updater comes back for them on its next cycle.
	for cycle := 0; cycle == 0 || more; cycle++ {
		if cycle == 20 {
			return nil, errors.New("the updater still had unread columns after 20 cycles")
		}
		updated, more, updateErr = false, false, nil
		opts := &updater.UpdateOptions{
			ConfigPath:       *configPath,
			GridPrefix:       gridPrefix,
			GroupConcurrency: 1,
			GroupNames:       []string{group.Name},
			Write:            true,
			Freq:             0, // update each group once, then return
		}
		if err := updater.Update(ctx, client, nil, recording, opts); err != nil {
			return nil, fmt.Errorf("updater.Update: %w", err)
		}
		if updateErr != nil {
			return nil, fmt.Errorf("updating test group %q: %w", group.Name, updateErr)
		}
		if !updated {
			return nil, fmt.Errorf("updater.Update returned without updating test group %q", group.Name)
		}
	}

	grid, attrs, err := gcs.DownloadGrid(ctx, client, *gridPath)
	if err != nil {
		return nil, fmt.Errorf("downloading grid %s: %w", gridPath, err)
	}
	if attrs == nil {
		return nil, fmt.Errorf("the updater wrote no grid at %s", gridPath)
	}
	out, err := convert(ctx, group.Name, grid)
	if err != nil || junitData == nil {
		return out, err
	}
	if out.Testcases, err = parsedTestcases(junitData); err != nil {
		return nil, err
	}
	return out, nil
}

// The --junit build: the job, its bucket and the one build that holds the file.
const (
	junitJob    = "junit"
	junitBucket = "junit"
	junitBuild  = "1"
)

// junitOptions turns --junit into the flags of a group reading that one build.
func junitOptions(opt options) options {
	opt.gcsPrefix = junitBucket + "/logs/" + junitJob
	opt.configYAML = ""
	opt.name = junitJob
	opt.disableProwjobAnalysis = true
	opt.columnHeaders = nil
	return opt
}

// seedJunitBuild writes the build: started.json and finished.json (passed) of now, and the file.
func seedJunitBuild(ctx context.Context, client gcs.Client, data []byte) error {
	now := time.Now().Unix()
	files := map[string][]byte{
		"started.json":           []byte(fmt.Sprintf(`{"timestamp": %d}`, now)),
		"finished.json":          []byte(fmt.Sprintf(`{"timestamp": %d, "passed": true, "result": "SUCCESS"}`, now)),
		"artifacts/junit_01.xml": data,
	}
	for name, body := range files {
		p, err := gcs.NewPath(fmt.Sprintf("gs://%s/logs/%s/%s/%s", junitBucket, junitJob, junitBuild, name))
		if err != nil {
			return err
		}
		if _, err := client.Upload(ctx, *p, body, gcs.DefaultACL, gcs.NoCache); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
	}
	return nil
}

type testcaseJSON struct {
	Name           string `json:"name"`
	Classname      string `json:"classname"`
	Error          bool   `json:"error"`
	Failure        bool   `json:"failure"`
	Skipped        bool   `json:"skipped"`
	SkippedMessage string `json:"skipped_message"`
	SkippedText    string `json:"skipped_text"`
}

// parsedTestcases is TestGrid's metadata/junit Parse of the file, suites flattened the way the
// updater's flattenResults does (nested suites first, names joined with "." where both are set).
func parsedTestcases(data []byte) ([]testcaseJSON, error) {
	suites, err := junit.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("TestGrid's junit.Parse: %w", err)
	}
	out := []testcaseJSON{}
	var walk func(parent string, suite junit.Suite)
	walk = func(parent string, suite junit.Suite) {
		name := dotName(parent, suite.Name)
		for _, inner := range suite.Suites {
			walk(name, inner)
		}
		for _, r := range suite.Results {
			tc := testcaseJSON{Name: dotName(name, r.Name), Classname: r.ClassName, Error: r.Errored != nil, Failure: r.Failure != nil}
			if r.Skipped != nil {
				tc.Skipped, tc.SkippedMessage, tc.SkippedText = true, r.Skipped.Message, r.Skipped.Value
			}
			out = append(out, tc)
		}
	}
	for _, s := range suites.Suites {
		walk("", s)
	}
	return out, nil
}

// dotName is the updater's: left.right, or whichever is set.
func dotName(left, right string) string {
	if left != "" && right != "" {
		return left + "." + right
	}
	if right == "" {
		return left
	}
	return right
}

type columnJSON struct {
	Build     string   `json:"build"`
	Name      string   `json:"name"`
	StartedMs float64  `json:"started_ms"`
	Extra     []string `json:"extra"`
	Hint      string   `json:"hint"`
}

type alertJSON struct {
	FailCount         int32  `json:"fail_count"`
	FailBuildID       string `json:"fail_build_id"`
	LatestFailBuildID string `json:"latest_fail_build_id"`
	PassBuildID       string `json:"pass_build_id"`
	FailureMessage    string `json:"failure_message"`
}

type rowJSON struct {
	Name     string     `json:"name"`
	ID       string     `json:"id"`
	Results  []string   `json:"results"`
	Messages []string   `json:"messages"`
	Icons    []string   `json:"icons"`
	Alert    *alertJSON `json:"alert"`
}

type gridJSON struct {
	Name    string       `json:"name"`
	Columns []columnJSON `json:"columns"`
	Rows    []rowJSON    `json:"rows"`
	// Only with --junit.
	Testcases []testcaseJSON `json:"testcases,omitempty"`
}

func convert(ctx context.Context, name string, grid *statepb.Grid) (*gridJSON, error) {
	out := gridJSON{Name: name, Columns: []columnJSON{}, Rows: []rowJSON{}}
	// Keep every column: earliest/latest bound what InflateGrid returns.
	cols, _, err := updater.InflateGrid(ctx, grid, time.Unix(0, 0), time.Now().Add(100*365*24*time.Hour))
	if err != nil {
		return nil, fmt.Errorf("inflating grid: %w", err)
	}
	if len(cols) != len(grid.Columns) {
		return nil, fmt.Errorf("inflated %d of %d columns", len(cols), len(grid.Columns))
	}
	for _, c := range grid.Columns {
		extra := c.Extra
		if extra == nil {
			extra = []string{}
		}
		out.Columns = append(out.Columns, columnJSON{Build: c.Build, Name: c.Name, StartedMs: c.Started, Extra: extra, Hint: c.Hint})
	}
	for _, r := range grid.Rows {
		row := rowJSON{Name: r.Name, ID: r.Id}
		for _, col := range cols {
			cell, ok := col.Cells[r.Name]
			if !ok {
				cell.Result = statuspb.TestStatus_NO_RESULT
			}
			row.Results = append(row.Results, cell.Result.String())
			row.Messages = append(row.Messages, cell.Message)
			row.Icons = append(row.Icons, cell.Icon)
		}
		if a := r.AlertInfo; a != nil {
			row.Alert = &alertJSON{
				FailCount:         a.FailCount,
				FailBuildID:       a.FailBuildId,
				LatestFailBuildID: a.LatestFailBuildId,
				PassBuildID:       a.PassBuildId,
				FailureMessage:    a.FailureMessage,
			}
		}
		out.Rows = append(out.Rows, row)
	}
	return &out, nil
}
