#include "sluice/notice/email.h"

#include <fmt/format.h>
#include <gmime/gmime.h>

#include <memory>
#include <mutex>

#include "sluice/service/notice.h"

namespace sluice::notice {
namespace {

Error Bad(std::string message) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(message), "bad_email");
}

struct Unref {
  void operator()(gpointer p) const { g_object_unref(p); }
};
template <typename T>
using Owned = std::unique_ptr<T, Unref>;

// Every text part's text, decoded (transfer encoding and charset) to UTF-8, one after another.
void CollectText(GMimeObject*, GMimeObject* part, gpointer data) {
  auto* text = static_cast<std::string*>(data);
  if (!GMIME_IS_TEXT_PART(part)) return;
  char* decoded = g_mime_text_part_get_text(GMIME_TEXT_PART(part));
  if (decoded == nullptr) return;
  text->append(decoded);
  text->push_back('\n');
  g_free(decoded);
}

}  // namespace

Result<EmailNotice> ParseNoticeEmail(std::string_view message) {
  if (message.size() > kMaxEmailBytes) {
    return Bad(fmt::format("the e-mail is {} bytes, over the {} read at most", message.size(),
                           kMaxEmailBytes));
  }
  if (message.empty()) return Bad("the e-mail is empty");
  static std::once_flag init;
  std::call_once(init, [] { g_mime_init(); });
  Owned<GMimeStream> stream(g_mime_stream_mem_new_with_buffer(message.data(), message.size()));
  Owned<GMimeParser> parser(g_mime_parser_new_with_stream(stream.get()));
  Owned<GMimeMessage> parsed(g_mime_parser_construct_message(parser.get(), nullptr));
  if (!parsed) return Bad("not an e-mail: GMime found no RFC 5322 message in it");
  EmailNotice out;
  InternetAddressList* from = g_mime_message_get_from(parsed.get());
  const int count = from != nullptr ? internet_address_list_length(from) : 0;
  for (int i = 0; i < count && out.sender.empty(); ++i) {
    InternetAddress* a = internet_address_list_get_address(from, i);
    if (INTERNET_ADDRESS_IS_MAILBOX(a)) {
      const char* addr = internet_address_mailbox_get_addr(INTERNET_ADDRESS_MAILBOX(a));
      if (addr != nullptr && std::string_view(addr).find('@') != std::string_view::npos) {
        out.sender = addr;
      }
    }
  }
  if (out.sender.empty()) return Bad("not an abuse e-mail: it has no From address");
  if (const char* id = g_mime_message_get_message_id(parsed.get()); id != nullptr) {
    out.message_id = id;
  }
  if (const char* subject = g_mime_message_get_subject(parsed.get()); subject != nullptr) {
    out.subject = subject;
  }
  std::string text;
  g_mime_message_foreach(parsed.get(), CollectText, &text);
  // A single-part message is its own text part: foreach walks the children of a multipart only.
  if (GMimeObject* body = g_mime_message_get_mime_part(parsed.get());
      body != nullptr && !GMIME_IS_MULTIPART(body)) {
    if (text.empty()) CollectText(nullptr, body, &text);
  }
  out.pastes = service::PasteLinksIn(text);
  return out;
}

}  // namespace sluice::notice
