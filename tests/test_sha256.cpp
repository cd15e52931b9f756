#include "catch.hpp"
#include "digest/sha256.hpp"

using rime::sha256_hex;

TEST_CASE("sha256 matches the FIPS 180-4 test vectors", "[digest]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  CHECK(sha256_hex(million) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256 is the same whether fed at once or in pieces", "[digest]") {
  std::string text(1000, 'x');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>('a' + i % 26);
  rime::Sha256 h;
  for (size_t i = 0; i < text.size(); i += 7) h.update(std::string_view(text).substr(i, 7));
  CHECK(h.finish_hex() == sha256_hex(text));
}
