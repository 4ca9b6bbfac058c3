#include "sigv4.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>
#include <ctime>

namespace sluice::store::s3 {
namespace {

std::string Hex(const unsigned char* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &size);
  return std::string(reinterpret_cast<const char*>(out), size);
}

std::string Trim(std::string_view value) {
  // Canonical header values: leading and trailing space dropped, inner runs of spaces made one.
  std::string out;
  bool space = false;
  for (char c : value) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::pair<std::string, std::string>> CanonicalHeaders(const SigV4Request& request) {
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& [name, value] : request.headers) headers.emplace_back(Lower(name), Trim(value));
  std::sort(headers.begin(), headers.end());
  return headers;
}

std::string SignedHeaders(const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string out;
  for (const auto& header : headers) {
    if (!out.empty()) out += ';';
    out += header.first;
  }
  return out;
}

}  // namespace

std::string UriEncode(std::string_view text, bool keep_slash) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += c;
    } else {
      out += fmt::format("%{:02X}", u);
    }
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return Hex(digest, sizeof digest);
}

std::string Md5Base64(std::string_view data) {
  // Through EVP: OpenSSL 3 deprecates MD5(), and deprecation warnings are errors here.
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest, &size, EVP_md5(), nullptr);
  // EVP_EncodeBlock writes 4 characters per 3 bytes and a terminating NUL.
  unsigned char encoded[((EVP_MAX_MD_SIZE + 2) / 3) * 4 + 1];
  const int length = EVP_EncodeBlock(encoded, digest, static_cast<int>(size));
  return std::string(reinterpret_cast<const char*>(encoded), static_cast<size_t>(length));
}

std::string CanonicalQuery(const std::vector<std::pair<std::string, std::string>>& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  for (const auto& [name, value] : query) {
    encoded.emplace_back(UriEncode(name, false), UriEncode(value, false));
  }
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out += '&';
    out += name;
    out += '=';
    out += value;
  }
  return out;
}

std::string CanonicalRequest(const SigV4Request& request) {
  const auto headers = CanonicalHeaders(request);
  std::string out =
      request.method + '\n' + request.encoded_path + '\n' + CanonicalQuery(request.query) + '\n';
  for (const auto& [name, value] : headers) out += name + ':' + value + '\n';
  out += '\n';
  out += SignedHeaders(headers);
  out += '\n';
  out += request.payload_sha256;
  return out;
}

std::string StringToSign(std::string_view amz_date, std::string_view scope,
                         std::string_view canonical_request) {
  return fmt::format("AWS4-HMAC-SHA256\n{}\n{}\n{}", amz_date, scope, Sha256Hex(canonical_request));
}

std::string SigningKey(std::string_view secret_key, std::string_view date, std::string_view region,
                       std::string_view service) {
  const std::string k_date = Hmac("AWS4" + std::string(secret_key), date);
  const std::string k_region = Hmac(k_date, region);
  const std::string k_service = Hmac(k_region, service);
  return Hmac(k_service, "aws4_request");
}

std::string Authorization(const SigV4Request& request, const SigV4Key& key,
                          std::string_view amz_date) {
  const std::string_view date = amz_date.substr(0, 8);
  const std::string scope = fmt::format("{}/{}/{}/aws4_request", date, key.region, key.service);
  const std::string to_sign = StringToSign(amz_date, scope, CanonicalRequest(request));
  const std::string signature =
      Hmac(SigningKey(key.secret_key, date, key.region, key.service), to_sign);
  return fmt::format(
      "AWS4-HMAC-SHA256 Credential={}/{}, SignedHeaders={}, Signature={}", key.access_key, scope,
      SignedHeaders(CanonicalHeaders(request)),
      Hex(reinterpret_cast<const unsigned char*>(signature.data()), signature.size()));
}

std::string AmzDate(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  ::gmtime_r(&t, &utc);
  char out[17];
  std::strftime(out, sizeof out, "%Y%m%dT%H%M%SZ", &utc);
  return out;
}

}  // namespace sluice::store::s3
