// ApiError: an error answered to an HTTP client in OpenAI's shape,
// {"error": {"message", "type", "param", "code"}}, with its HTTP status.
// Plain value type.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace ecoserve::server {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending request field, "" when none
  std::string code;   // machine-readable code, "" when none

  // The JSON body; "param" and "code" are null when empty.
  nlohmann::json to_json() const;
};

ApiError make_error(int status, std::string message, std::string type, std::string code = "",
                    std::string param = "");
ApiError bad_request(std::string message, std::string param = "");
ApiError not_found(std::string message, std::string param = "", std::string code = "");

// JSON text for the wire: invalid UTF-8 (raw token bytes) is replaced, never thrown.
std::string dump_json(const nlohmann::json& j);

}  // namespace ecoserve::server
