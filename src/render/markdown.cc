#include "sluice/render/markdown.h"

#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

namespace sluice::render {
namespace {

constexpr const char* kExtensions[] = {"table", "strikethrough", "autolink", "tasklist",
                                       "tagfilter"};

// The registry of extensions is a global list the library fills once; registering it before any
// parser exists is the library's own advice (cmark-gfm-core-extensions.h).
void RegisterExtensionsOnce() {
  static std::once_flag once;
  std::call_once(once, [] { cmark_gfm_core_extensions_ensure_registered(); });
}

struct ParserDeleter {
  void operator()(cmark_parser* p) const { cmark_parser_free(p); }
};
struct NodeDeleter {
  void operator()(cmark_node* n) const { cmark_node_free(n); }
};

// Every image becomes a link to its address, its alt text (the image's children) the label: the
// page loads nothing from anywhere but this server, and the reader still sees where it pointed.
void ImagesToLinks(cmark_node* root) {
  std::vector<cmark_node*> images;
  cmark_iter* iter = cmark_iter_new(root);
  for (cmark_event_type ev; (ev = cmark_iter_next(iter)) != CMARK_EVENT_DONE;) {
    cmark_node* node = cmark_iter_get_node(iter);
    if (ev == CMARK_EVENT_ENTER && cmark_node_get_type(node) == CMARK_NODE_IMAGE) {
      images.push_back(node);
    }
  }
  cmark_iter_free(iter);
  // Innermost first (the iterator enters outer nodes first), so a link made from an image inside
  // an image's alt text is moved along with its parent's children.
  for (auto it = images.rbegin(); it != images.rend(); ++it) {
    cmark_node* image = *it;
    cmark_node* link = cmark_node_new(CMARK_NODE_LINK);
    const char* url = cmark_node_get_url(image);
    cmark_node_set_url(link, url != nullptr ? url : "");
    const char* title = cmark_node_get_title(image);
    if (title != nullptr) cmark_node_set_title(link, title);
    while (cmark_node* child = cmark_node_first_child(image)) cmark_node_append_child(link, child);
    if (cmark_node_first_child(link) == nullptr) {
      cmark_node* label = cmark_node_new(CMARK_NODE_TEXT);
      cmark_node_set_literal(label, "image");
      cmark_node_append_child(link, label);
    }
    cmark_node_insert_before(image, link);
    cmark_node_free(image);  // unlinks it first
  }
}

// The renderer writes `<a href="` for every link and no other source can (raw HTML is omitted
// and text is escaped), so marking each one is a replacement in the output.
std::string MarkLinks(const char* html) {
  constexpr std::string_view kOpen = "<a href=\"";
  constexpr std::string_view kMarked = "<a rel=\"nofollow noopener ugc\" href=\"";
  std::string_view in(html);
  std::string out;
  out.reserve(in.size() + in.size() / 16);
  for (size_t at = 0;;) {
    const size_t found = in.find(kOpen, at);
    if (found == std::string_view::npos) {
      out.append(in.substr(at));
      break;
    }
    out.append(in.substr(at, found - at));
    out.append(kMarked);
    at = found + kOpen.size();
  }
  return out;
}

// A task list's boxes are disabled inputs with no label; the renderer writes each in one of two
// exact forms, which no paste can (raw HTML is omitted), so each gets its state in words.
std::string LabelTasks(std::string html) {
  const std::pair<std::string_view, std::string_view> kBoxes[] = {
      {"<input type=\"checkbox\" checked=\"\" disabled=\"\" />",
       "<input type=\"checkbox\" checked=\"\" disabled=\"\" aria-label=\"done\" />"},
      {"<input type=\"checkbox\" disabled=\"\" />",
       "<input type=\"checkbox\" disabled=\"\" aria-label=\"not done\" />"}};
  for (const auto& [from, to] : kBoxes) {
    for (size_t at = html.find(from); at != std::string::npos;
         at = html.find(from, at + to.size())) {
      html.replace(at, from.size(), to);
    }
  }
  return html;
}

}  // namespace

std::string RenderMarkdown(std::string_view text) {
  RegisterExtensionsOnce();
  // No CMARK_OPT_UNSAFE: raw HTML is omitted and dangerous link schemes emptied. Footnotes stay
  // off: their back-references are ids the page does not need.
  const int options = CMARK_OPT_DEFAULT | CMARK_OPT_VALIDATE_UTF8 | CMARK_OPT_GITHUB_PRE_LANG;
  std::unique_ptr<cmark_parser, ParserDeleter> parser(cmark_parser_new(options));
  for (const char* name : kExtensions) {
    if (cmark_syntax_extension* ext = cmark_find_syntax_extension(name)) {
      cmark_parser_attach_syntax_extension(parser.get(), ext);
    }
  }
  cmark_parser_feed(parser.get(), text.data(), text.size());
  std::unique_ptr<cmark_node, NodeDeleter> root(cmark_parser_finish(parser.get()));
  if (!root) return "";
  ImagesToLinks(root.get());
  char* html =
      cmark_render_html(root.get(), options, cmark_parser_get_syntax_extensions(parser.get()));
  std::string out = LabelTasks(MarkLinks(html));
  std::free(html);
  return out;
}

}  // namespace sluice::render
