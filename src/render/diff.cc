#include "sluice/render/diff.h"

#include <cstdint>
#include <cstring>
#include <dtl/dtl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

namespace sluice::render {
namespace {

std::vector<std::string_view> DiffLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

void AppendU32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }

}  // namespace

std::string UnifiedDiff(std::string_view parent, std::string_view child,
                        std::string_view parent_name, std::string_view child_name) {
  const std::vector<std::string_view> a = DiffLines(parent);
  const std::vector<std::string_view> b = DiffLines(child);
  // The common head and tail cost the algorithm nothing to set aside, beyond the context a hunk
  // shows of them.
  constexpr size_t kContext = 3;
  size_t head = 0;
  while (head < a.size() && head < b.size() && a[head] == b[head]) ++head;
  if (head == a.size() && head == b.size()) return "";
  size_t tail = 0;
  while (tail < a.size() - head && tail < b.size() - head &&
         a[a.size() - 1 - tail] == b[b.size() - 1 - tail]) {
    ++tail;
  }
  const size_t skip_head = head > kContext ? head - kContext : 0;
  const size_t skip_tail = tail > kContext ? tail - kContext : 0;
  // Lines become numbers (equal lines, equal numbers), so the algorithm compares integers.
  std::unordered_map<std::string_view, uint32_t> ids;
  auto number = [&](const std::vector<std::string_view>& lines) {
    std::vector<uint32_t> out;
    out.reserve(lines.size() - skip_head - skip_tail);
    for (size_t i = skip_head; i < lines.size() - skip_tail; ++i) {
      out.push_back(ids.try_emplace(lines[i], static_cast<uint32_t>(ids.size())).first->second);
    }
    return out;
  };
  std::vector<uint32_t> an = number(a);
  std::vector<uint32_t> bn = number(b);
  dtl::Diff<uint32_t, std::vector<uint32_t>> diff(an, bn);
  diff.compose();
  diff.composeUnifiedHunks();

  std::string out;
  out.reserve(parent.size() / 4 + child.size() + 256);
  out += "--- ";
  out += parent_name;
  out += "\n+++ ";
  out += child_name;
  out += '\n';
  auto line = [&](char mark, std::string_view text) {
    out += mark;
    out += text;
    out += '\n';
  };
  auto print = [&](const std::pair<uint32_t, dtl::elemInfo>& e) {
    const dtl::elemInfo& info = e.second;
    if (info.type == dtl::SES_ADD) {
      line('+', b[skip_head + static_cast<size_t>(info.afterIdx) - 1]);
    } else if (info.type == dtl::SES_DELETE) {
      line('-', a[skip_head + static_cast<size_t>(info.beforeIdx) - 1]);
    } else {
      line(' ', a[skip_head + static_cast<size_t>(info.beforeIdx) - 1]);
    }
  };
  for (const auto& hunk : diff.getUniHunks()) {
    const long long shift = static_cast<long long>(skip_head);
    out += "@@ -" + std::to_string(hunk.a + shift) + "," + std::to_string(hunk.b) + " +" +
           std::to_string(hunk.c + shift) + "," + std::to_string(hunk.d) + " @@\n";
    for (const auto& e : hunk.common[0]) print(e);
    for (const auto& e : hunk.change) print(e);
    for (const auto& e : hunk.common[1]) print(e);
  }
  return out;
}

std::string EncodeDiffJob(std::string_view parent, std::string_view child,
                          std::string_view parent_name, std::string_view child_name) {
  std::string job;
  job.reserve(16 + parent.size() + child.size() + parent_name.size() + child_name.size());
  for (std::string_view part : {parent, child, parent_name, child_name}) {
    AppendU32(job, static_cast<uint32_t>(part.size()));
    job += part;
  }
  return job;
}

bool DecodeDiffJob(std::string_view job, std::string_view& parent, std::string_view& child,
                   std::string_view& parent_name, std::string_view& child_name) {
  std::string_view* parts[] = {&parent, &child, &parent_name, &child_name};
  for (std::string_view* part : parts) {
    if (job.size() < 4) return false;
    uint32_t size;
    std::memcpy(&size, job.data(), 4);
    job.remove_prefix(4);
    if (job.size() < size) return false;
    *part = job.substr(0, size);
    job.remove_prefix(size);
  }
  return job.empty();
}

}  // namespace sluice::render
