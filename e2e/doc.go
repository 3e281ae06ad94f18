// Package e2e holds Sluice's end-to-end tests; it has no code of its own.
// They run the sample events in ../events against a real Redis and
// PostgreSQL (SLUICE_TEST_REDIS_URL, SLUICE_TEST_DATABASE_URL; without them
// the tests skip, unless SLUICE_REQUIRE_INTEGRATION=1), two ways:
//
//   - TestHandlers, in process: every sample but migrate's through the
//     handler its function uses, wired from configuration.
//   - TestEmulator, out of process: each function's bootstrap, built as
//     `make build` builds it (linux, CGO off, -tags lambda.norpc), under
//     the AWS Lambda Runtime Interface Emulator (go tool aws-lambda-rie),
//     configured from the environment as in Lambda and invoked over HTTP
//     with the samples: the authorizer and check on a seeded database;
//     migrate on an empty database, which it migrates; then admin-write
//     (POST /plans, POST /rules) and admin-read (GET /rules/{id}, GET
//     /rules, and a POST /rules it must refuse) on that database. SLUICE_BUILD_DIR points at prebuilt binaries
//     (<dir>/<function>/bootstrap; relative to e2e/, so best absolute,
//     such as $PWD/build/host from the module root); without it the test
//     builds them into a temporary directory. Linux only.
//
// TestColdStart and BenchmarkColdStart time the built authorizer's cold
// start under the emulator.
//
// TestHostile* (hostile_test.go) send a hostile corpus to the same
// in-process handlers and to the admin API over net/http: oversized
// headers and subjects, invalid UTF-8, hash-tag braces and stars in
// subjects, racing conflicting writes, 10,000-rule lists and snapshots.
// Each case answers a 4xx problem, a Deny or 401, never a 5xx, and loses
// nothing.
package e2e
