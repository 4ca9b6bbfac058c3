#include "multipart.h"

#include <algorithm>
#include <cctype>

#include "field_text.h"

namespace sluice::http {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Value of `key` in a header's parameters (`form-data; name="x"; filename="y"`).
std::optional<std::string> Param(std::string_view header_value, std::string_view key) {
  size_t pos = 0;
  while (pos < header_value.size()) {
    size_t semi = header_value.find(';', pos);
    if (semi == std::string_view::npos) semi = header_value.size();
    std::string_view item = TrimBlanks(header_value.substr(pos, semi - pos));
    pos = semi + 1;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    if (Lower(TrimBlanks(item.substr(0, eq))) != key) continue;
    std::string_view value = TrimBlanks(item.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    return std::string(value);
  }
  return std::nullopt;
}

}  // namespace

bool IsMultipart(std::string_view content_type) {
  return Lower(TrimBlanks(content_type.substr(0, content_type.find(';'))))
      .starts_with("multipart/");
}

std::optional<std::string> MultipartBoundary(std::string_view content_type) {
  const size_t semi = content_type.find(';');
  if (Lower(TrimBlanks(content_type.substr(0, semi))) != "multipart/form-data") return std::nullopt;
  if (semi == std::string_view::npos) return std::nullopt;
  auto boundary = Param(content_type.substr(semi + 1), "boundary");
  if (!boundary || boundary->empty() || boundary->size() > 200) return std::nullopt;
  return boundary;
}

std::optional<std::vector<FormPart>> ParseMultipart(std::string_view body,
                                                    std::string_view boundary) {
  const std::string delimiter = "--" + std::string(boundary);
  const std::string next_delimiter = "\r\n" + delimiter;
  if (body.substr(0, delimiter.size()) != delimiter) return std::nullopt;
  size_t pos = delimiter.size();
  std::vector<FormPart> parts;
  for (;;) {
    if (body.substr(pos, 2) == "--") return parts;  // closing delimiter
    if (body.substr(pos, 2) != "\r\n") return std::nullopt;
    pos += 2;
    const size_t headers_end = body.find("\r\n\r\n", pos);
    if (headers_end == std::string_view::npos) return std::nullopt;
    FormPart part;
    bool has_disposition = false;
    std::string_view headers = body.substr(pos, headers_end - pos);
    while (!headers.empty()) {
      size_t eol = headers.find("\r\n");
      std::string_view line = headers.substr(0, eol);
      headers = eol == std::string_view::npos ? std::string_view() : headers.substr(eol + 2);
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) return std::nullopt;
      if (Lower(TrimBlanks(line.substr(0, colon))) != "content-disposition") continue;
      const std::string_view value = line.substr(colon + 1);
      auto name = Param(value, "name");
      if (!name) return std::nullopt;
      part.name = *name;
      part.filename = Param(value, "filename");
      has_disposition = true;
    }
    if (!has_disposition) return std::nullopt;
    pos = headers_end + 4;
    const size_t end = body.find(next_delimiter, pos);
    if (end == std::string_view::npos) return std::nullopt;
    part.content = body.substr(pos, end - pos);
    parts.push_back(std::move(part));
    pos = end + next_delimiter.size();
  }
}

}  // namespace sluice::http
