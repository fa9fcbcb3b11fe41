#include "apps/ecoserve/commands.h"

namespace ecoserve::apps {

void add_profile_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("profile", "(not built yet)");
  cmd->callback([&exit_code] { exit_code = 2; });
}

}  // namespace ecoserve::apps
