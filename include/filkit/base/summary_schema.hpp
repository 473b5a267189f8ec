// The summary schemas: one JSON Schema (draft 7) per command's summary (--json), in
// schemas/summary/<command>.schema.json, embedded in the library at build time. They are the one
// description of every summary: the jobs' writers are checked against them (write_job_outputs), the
// report checks what it reads against them (report/), filkit.torch's writer against dpsgd's, and the
// tests check every job's summary (docs/architecture.md, "Summaries"). Validation is valijson's.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace filkit {

/// The commands that have a summary schema, in alphabetical order.
std::vector<std::string> summary_schema_commands();

/// The schema of `command`'s summary, as JSON. Throws OptionError naming the command when it has none.
const nlohmann::json& summary_schema(std::string_view command);

/// Where `summary` departs from the schema of the command it names ("command"): one line each,
/// "/snapshots/0/epsilon: ..." (a JSON pointer, then valijson's description), at most `limit`
/// lines; empty when it conforms. A summary without a "command" string, or naming a command
/// without a schema, gives one line saying so.
std::vector<std::string> summary_schema_violations(const nlohmann::json& summary, std::size_t limit = 10);

/// Whether the writers' checks are strict (the environment variable FILKIT_STRICT_SUMMARY_SCHEMA is
/// set and not "0"; the test suite sets it): a summary that departs from its schema is then an
/// internal error instead of a warning.
bool strict_summary_schema();

/// The writer's check (write_job_outputs): a summary that departs from its schema is filkit's own
/// bug, so the outputs are still written and each departure is printed to stderr as a warning, or,
/// when strict_summary_schema(), throws std::logic_error listing them (exit status 70).
void check_written_summary(const nlohmann::json& summary);

}  // namespace filkit
