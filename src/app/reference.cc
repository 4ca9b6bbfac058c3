#include "reference.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "reload.h"
#include "settings.h"

namespace sluice::app {
namespace {

// ---- roff
// ----------------------------------------------------------------------------------------

// Text for a roff line: backslashes escaped, and a line that would start with a control character
// ('.' or '\'') guarded so that man does not read it as a request.
std::string Roff(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '\n') {
      out += "\n.br\n";
    } else {
      out += c;
    }
  }
  if (!out.empty() && (out.front() == '.' || out.front() == '\'')) out.insert(0, "\\&");
  return out;
}

// A flag, variable or value typed literally: its hyphens are minus signs, so that a reader can
// copy it from a UTF-8 terminal (man renders a plain '-' as a hyphen, U+2010).
std::string Literal(std::string_view text) {
  std::string out;
  for (char c : Roff(text)) {
    if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  return out;
}

std::string CommandPath(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* at = &app; at != nullptr; at = at->get_parent()) {
    if (!at->get_name().empty()) names.insert(names.begin(), at->get_name());
  }
  std::string path = "sluice";
  for (const std::string& name : names) path += " " + name;
  return path;
}

// CLI11's option groups are nameless subcommands: only the real ones are commands.
bool Named(const CLI::App* app) { return !app->get_name().empty(); }

bool IsHelp(const CLI::Option* opt) { return opt->get_name() == "--help"; }

bool IsSetting(const CLI::Option* opt) {
  for (const SettingSpec& spec : ServeSettings()) {
    if (opt->get_name() == FlagName(spec)) return true;
  }
  return false;
}

// One command, its options (the settings of serve are described once, under SETTINGS), then its
// subcommands in the order they were declared.
void DescribeCommand(const CLI::App& app, std::string& out) {
  const std::string path = CommandPath(app);
  out += fmt::format(".SS \"{}\"\n", Literal(path));
  std::string synopsis = fmt::format(".B {}\n", Literal(path));
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_positional()) {
      const std::string name = opt->get_name(true);
      synopsis += opt->get_required() ? fmt::format(".I {}\n", Literal(name))
                                      : fmt::format(".RI [ {} ]\n", Literal(name));
    }
  }
  const auto subcommands = app.get_subcommands(Named);
  if (!subcommands.empty()) synopsis += ".I COMMAND\n";
  out += synopsis + ".br\n" + Roff(app.get_description()) + "\n";
  bool any_setting = false;
  for (const CLI::Option* opt : app.get_options()) {
    if (IsHelp(opt)) continue;
    if (IsSetting(opt)) {
      any_setting = true;
      continue;
    }
    const bool takes_value = opt->get_items_expected_max() != 0;
    const std::string name = opt->get_positional() ? opt->get_name(true) : opt->get_name();
    out += ".TP\n";
    if (opt->get_positional()) {
      out += fmt::format(".I {}\n", Literal(name));
    } else if (takes_value) {
      out += fmt::format(".BI {} \" \" {}\n", Literal(name), "VALUE");
    } else {
      out += fmt::format(".B {}\n", Literal(name));
    }
    std::string text = opt->get_description();
    if (!opt->get_default_str().empty()) text += " (default: " + opt->get_default_str() + ")";
    if (opt->get_required() && !opt->get_positional()) text += " (required)";
    if (!opt->get_envname().empty()) text += "; variable " + opt->get_envname();
    out += Roff(text) + "\n";
  }
  if (any_setting) {
    out += ".TP\n.I SETTINGS\nEvery setting below, as a flag; see \\fBSETTINGS\\fR.\n";
  }
  for (const CLI::App* sub : subcommands) DescribeCommand(*sub, out);
}

// ---- TOML
// ----------------------------------------------------------------------------------------

// `text` wrapped into "# " lines no longer than `width` characters.
std::string CommentLines(std::string_view text, size_t width = 100) {
  std::string out, line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(start, end - start);
    if (!line.empty() && 2 + line.size() + 1 + word.size() > width) {
      out += "# " + line + "\n";
      line.clear();
    }
    if (!line.empty()) line += ' ';
    line += word;
    start = end + 1;
  }
  if (!line.empty()) out += "# " + line + "\n";
  return out;
}

// A default as TOML: numbers and booleans bare (the loader takes either form), the rest a basic
// string with its quotes and backslashes escaped.
std::string TomlValue(const SettingSpec& spec) {
  const std::string_view value = spec.default_value;
  switch (spec.type) {
    case SettingType::kInteger:
    case SettingType::kNumber:
    case SettingType::kBoolean:
      return std::string(value);
    case SettingType::kText:
    case SettingType::kList:
    case SettingType::kChoice:
    case SettingType::kDuration:
      break;
  }
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Whether a reload applies the setting, from the one list of live keys (src/app/reload.cc), so the
// reference and the server cannot disagree.
std::string ReloadNote(const SettingSpec& spec) {
  return IsLiveSetting(spec.key) ? "SIGHUP applies it to new requests."
                                 : "Takes a restart to change.";
}

// ---- Markdown
// ------------------------------------------------------------------------------------

// Help text as Markdown prose: the characters that would start emphasis, HTML or a table cell are
// escaped, so a declaration reads the same in the file as on `--help`.
std::string MarkdownText(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '*' || c == '<' || c == '>' || c == '|' || c == '[' || c == ']' ||
        c == '`') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

// A default or a literal in a code span; a backtick inside (none today) gets a longer fence.
std::string CodeSpan(std::string_view text) {
  if (text.find('`') != std::string_view::npos) return fmt::format("`` {} ``", text);
  return fmt::format("`{}`", text);
}

}  // namespace

std::string Completions(const CLI::App& app, std::string_view shell) {
  if (shell != "bash" && shell != "zsh") return "";
  std::string commands;
  std::string cases;
  for (const CLI::App* sub : app.get_subcommands(Named)) {
    commands += (commands.empty() ? "" : " ") + sub->get_name();
    std::string flags;
    for (const CLI::Option* opt : sub->get_options()) {
      if (opt->get_positional()) continue;
      for (const std::string& name : opt->get_lnames()) flags += " --" + name;
    }
    for (const CLI::App* nested : sub->get_subcommands(Named)) flags += " " + nested->get_name();
    cases += fmt::format("    {}) words=\"{}\" ;;\n", sub->get_name(), flags.substr(1));
  }
  std::string out =
      shell == "zsh" ? "#compdef sluice\nautoload -U +X bashcompinit && bashcompinit\n" : "";
  out += fmt::format(
      "# sluice(1) completion, generated by `sluice completions {}` from the flags --help lists.\n"
      "_sluice() {{\n"
      "  local cur=${{COMP_WORDS[COMP_CWORD]}} words\n"
      "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
      "    COMPREPLY=($(compgen -W \"{}\" -- \"$cur\"))\n"
      "    return\n"
      "  fi\n"
      "  case \"${{COMP_WORDS[1]}}\" in\n"
      "{}"
      "  esac\n"
      "  case \"$cur\" in\n"
      "    -*) COMPREPLY=($(compgen -W \"$words\" -- \"$cur\")) ;;\n"
      "    *) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n"
      "  esac\n"
      "}}\n"
      "complete -F _sluice sluice\n",
      shell, commands, cases);
  return out;
}

std::string ManPage(const CLI::App& app, std::string_view version) {
  std::string out;
  out += fmt::format(".TH SLUICE 1 \"\" \"sluice {}\" \"User Commands\"\n", Roff(version));
  out += ".SH NAME\nsluice \\- a pastebin that stays up when its dependencies do not\n";
  out += ".SH SYNOPSIS\n";
  for (const CLI::App* sub : app.get_subcommands(Named)) {
    out += fmt::format(".B sluice {}\n.RI [ OPTIONS ]\n.br\n", Literal(sub->get_name()));
  }
  out += ".B sluice \\-\\-version\n";
  out += ".SH DESCRIPTION\n" + Roff(app.get_description()) + ".\n";
  out +=
      ".PP\n"
      "People paste text and share a link; nobody has an account. When storage slows down or a "
      "neighbour hammers the site, sluice decides before the expensive call who gets a 201, a 200, "
      "a 429 or a 503, and exports every decision on /metrics.\n"
      ".PP\n"
      "Run as a service (the Debian package's unit), it reads\n"
      ".IR /etc/sluice/sluice.toml ,\n"
      "keeps its data under\n"
      ".IR /var/lib/sluice ,\n"
      "logs to the journal and tells systemd when it is ready and when it stops.\n";
  out += ".SH COMMANDS\n";
  for (const CLI::App* sub : app.get_subcommands(Named)) {
    DescribeCommand(*sub, out);
  }
  out +=
      ".SH SETTINGS\n"
      "Every setting of\n"
      ".B sluice serve\n"
      "is a key of the TOML file named by\n"
      ".B \\-\\-config\n"
      "(or SLUICE_CONFIG), a flag and a SLUICE_* environment variable. A flag wins over the "
      "variable, the variable over the file, the file over the default. A value outside what a "
      "setting allows, or an unknown key in the file, stops the start with a message that names "
      "the key, the value and what is allowed.\n"
      ".B sluice config \\-\\-example\n"
      "prints a file with every key below commented out at its default.\n";
  for (const SettingSpec& spec : ServeSettings()) {
    out += fmt::format(".TP\n.BI {} \" \" VALUE\n", Literal(FlagName(spec)));
    out += Roff(spec.help) + ".\n.br\n";
    out += fmt::format("Key \\fB{}\\fR, variable \\fB{}\\fR, default \\fB{}\\fR", Literal(spec.key),
                       Literal(EnvName(spec)),
                       std::string_view(spec.default_value).empty()
                           ? std::string("empty")
                           : "\"" + Literal(spec.default_value) + "\"");
    if (spec.type != SettingType::kText && spec.type != SettingType::kList) {
      out += "; " + Roff(AllowedValues(spec));
    }
    out += ".\n.br\n" + Roff(ReloadNote(spec)) + "\n";
  }
  out +=
      ".SH SIGNALS\n"
      ".TP\n.BR SIGTERM \", \" SIGINT\n"
      "Stop accepting, let in-flight requests finish (up to drain_timeout), and exit 0.\n"
      ".TP\n.B SIGHUP\n"
      "Read the configuration file again: the settings marked \"SIGHUP applies it\" under "
      "\\fBSETTINGS\\fR change for new requests; the others, when changed, are named in a "
      "warning and kept; an invalid file changes nothing (\\fBsystemctl reload sluice\\fR).\n";
  out +=
      ".SH ENVIRONMENT\n"
      ".TP\n.B SLUICE_CONFIG\nThe configuration file, as \\fB\\-\\-config\\fR.\n"
      ".TP\n.B SLUICE_*\nEach setting, as listed under \\fBSETTINGS\\fR.\n"
      ".TP\n.B NOTIFY_SOCKET\n"
      "Set by systemd for a unit of Type=notify: sluice sends READY=1 once its listeners are "
      "bound, STOPPING=1 when the drain starts, and RELOADING=1 then READY=1 around a reload.\n"
      ".TP\n.B PGPASSWORD\nThe PostgreSQL password (or ~/.pgpass), kept out of the logged URL.\n"
      ".TP\n.B REDIS_PASSWORD\nThe Redis password, instead of the cache URL.\n"
      ".TP\n.BR AWS_ACCESS_KEY_ID \", \" AWS_SECRET_ACCESS_KEY \", \" AWS_REGION\n"
      "Credentials and region of an s3:// blob store.\n";
  out +=
      ".SH FILES\n"
      "As the Debian package installs them:\n"
      ".TP\n.I /etc/sluice/sluice.toml\n"
      "The configuration, every key commented out at its default (a conffile).\n"
      ".TP\n.I /var/lib/sluice\n"
      "The unit's working directory, the only one it may write: the data dir (data_dir, "
      "./sluice-data by default, so /var/lib/sluice/sluice-data) holds meta.db (SQLite), blobs/ "
      "and sluice.lock.\n"
      ".TP\n.I /lib/systemd/system/sluice.service\n"
      "The hardened unit: \\fBsystemctl enable \\-\\-now sluice\\fR, "
      "\\fBjournalctl \\-u sluice\\fR.\n";
  out +=
      ".SH EXIT STATUS\n"
      "0 after a clean drain; 2 when a setting, the configuration file or the command line is "
      "refused, or the server cannot start (the message says why); another non-zero status for a "
      "usage error reported by the command-line parser.\n";
  out += ".SH SEE ALSO\n.BR systemctl (1),\n.BR journalctl (1),\n.BR systemd.exec (5)\n";
  return out;
}

std::string ExampleConfig(std::string_view version) {
  std::string out = fmt::format(
      "# sluice.toml: the settings of `sluice serve` (sluice {}), generated by\n"
      "# `sluice config --example` from the declarations `sluice serve --help` lists.\n"
      "#\n",
      version);
  out += CommentLines(
      "Every key is commented out at its default: remove the '#' in front of one to set it. A "
      "flag (--key-name) or an environment variable (SLUICE_KEY_NAME) wins over this file. Check "
      "a change with `sluice config --check FILE` before `systemctl reload sluice`; a relative "
      "path (data_dir) is relative to the working directory, /var/lib/sluice under the "
      "systemd unit.");
  for (const SettingSpec& spec : ServeSettings()) {
    out += "\n" + CommentLines(std::string(spec.help) + ".");
    std::string where = fmt::format("Flag {}, variable {}.", FlagName(spec), EnvName(spec));
    if (spec.type != SettingType::kText && spec.type != SettingType::kList) {
      where = fmt::format("Allowed: {}. {}", AllowedValues(spec), where);
    }
    out += CommentLines(where + " " + ReloadNote(spec));
    out += fmt::format("#{} = {}\n", spec.key, TomlValue(spec));
  }
  return out;
}

std::string ConfigurationMarkdown() {
  std::string out =
      "# Configuration reference\n"
      "\n"
      "<!-- Generated by `sluice config --markdown` from the declarations in src/app/settings.cc\n"
      "     (and src/app/reload.cc for what a reload applies). Do not edit: change a declaration,\n"
      "     then `build/dev/sluice config --markdown > docs/configuration.md`.\n"
      "     tests/docs/test_configuration_doc.py fails when this file is stale. -->\n"
      "\n"
      "Every setting of `sluice serve` is a key of the TOML file named by `--config` (or\n"
      "`SLUICE_CONFIG`), a flag (`--key-name`) and an environment variable (`SLUICE_KEY_NAME`).\n"
      "A flag wins over the variable, the variable over the file, the file over the default.\n"
      "\n"
      "- **Checked, whatever the source.** An unknown key in the file, or a value outside what\n"
      "  its declaration allows, stops the start: stderr names the key, the value and what is\n"
      "  allowed, e.g. `sluice serve: header_timeout = '0s': must be between 1ms and 1h (from\n"
      "  flag/env)`. So do settings that contradict each other (`default_ttl` longer than\n"
      "  `max_ttl`, `retry_after_min` above `retry_after_max`, `render_delay` or `faults` without\n"
      "  `fault_injection`, `s3_endpoint` without an `s3://` blob). `sluice config --check FILE`\n"
      "  applies the same checks without starting.\n"
      "- **Durations** are a number and a unit, `ns`, `us`, `ms`, `s`, `m` or `h`, decimals\n"
      "  allowed (`500us`, `250ms`, `1.5s`), kept to the nanosecond.\n"
      "- **The file is ASCII**: Debian's toml++ 3.3.0 misbehaves on some non-ASCII characters\n"
      "  (found by the config fuzzer), so sluice refuses such a file with the line number.\n"
      "- **A reload** (`SIGHUP`, `systemctl reload sluice`) applies the settings marked\n"
      "  *SIGHUP applies it* below to new requests; the others keep their values until a restart\n"
      "  and are named in a warning ([operations.md](operations.md#reload)).\n"
      "- `sluice config --example` prints the same settings as a TOML file, each commented out at\n"
      "  its default (the Debian package installs it as `/etc/sluice/sluice.toml`); `man sluice`\n"
      "  lists them too.\n"
      "\n"
      "```toml\n"
      "# sluice.toml\n"
      "listen = \"0.0.0.0:8080\"\n"
      "data_dir = \"/var/lib/sluice\"\n"
      "public_url = \"https://paste.example.org\"\n"
      "abuse_contact = \"mailto:abuse@paste.example.org\"\n"
      "default_ttl = \"1d\"\n"
      "max_ttl = \"1w\"\n"
      "max_paste_bytes = 500000\n"
      "```\n"
      "\n"
      "## Settings\n"
      "\n"
      "In the order `sluice serve --help` lists them.\n";
  for (const SettingSpec& spec : ServeSettings()) {
    out += fmt::format("\n### {}\n\n", spec.key);
    out += MarkdownText(spec.help) + ".\n\n";
    const std::string_view value = spec.default_value;
    out += fmt::format("- Default: {}", value.empty() ? std::string("empty") : CodeSpan(value));
    if (spec.type != SettingType::kText && spec.type != SettingType::kList) {
      out += "; allowed: " + MarkdownText(AllowedValues(spec));
    }
    out += ".\n";
    out +=
        fmt::format("- Flag {}, variable {}.\n", CodeSpan(FlagName(spec)), CodeSpan(EnvName(spec)));
    out += fmt::format("- {}\n", IsLiveSetting(spec.key) ? "*SIGHUP applies it* to new requests."
                                                         : "Takes a restart to change.");
  }
  return out;
}

}  // namespace sluice::app
