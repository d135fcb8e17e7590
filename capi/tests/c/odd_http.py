"""An HTTP MCP server that breaks the protocol on purpose, for capi/tests/c/api_test.c.

    python3 odd_http.py

Listens on a free port of 127.0.0.1 and prints it on the first line of stdout. The path of a
POST says what the server does with it:

  /forbidden  403 to everything (the credentials are refused);
  /garbage    a proper 2026-07-28 `server/discover`, then a response head that is not HTTP;
  /hangup     a proper 2026-07-28 `server/discover`, then the connection closed without a
              response;
  /expire     a 2025-11-25 handshake that opens a session, then 404 to every `tools/call`
              (the session is gone);
  /moved      an OAuth-protected resource: 401 naming authorization server /as1 (whose
              client credentials grant gives a token to anyone), then, with that token, 401
              naming /as2 (the resource moved to another authorization server).

Anything else gets 404. Python's standard library only.
"""
import http.server
import json
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, message=None, headers=()):
        body = b"" if message is None else json.dumps(message).encode()
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if message is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            message = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            message = {}
        method = message.get("method")
        if self.path == "/forbidden":
            self.reply(403)
        elif self.path in ("/garbage", "/hangup") and method == "server/discover":
            result = {"resultType": "complete", "supportedVersions": ["2026-07-28"],
                      "capabilities": {"tools": {}},
                      "serverInfo": {"name": "odd-http", "version": "1"}}
            self.reply(200, {"jsonrpc": "2.0", "id": message["id"], "result": result})
        elif self.path == "/garbage":
            self.wfile.write(b"HTTP/1.1 two hundred OK\r\n\r\n")
            self.close_connection = True
        elif self.path == "/hangup":
            self.close_connection = True
        elif self.path == "/moved":
            moved = self.headers.get("Authorization") == "Bearer tok-1"
            prm = f"{self.base()}/prm/{'as2' if moved else 'as1'}"
            self.reply(401, None, [("WWW-Authenticate", f'Bearer resource_metadata="{prm}"')])
        elif self.path == "/as1/token":
            self.reply(200, {"access_token": "tok-1", "token_type": "Bearer", "expires_in": 3600})
        elif self.path == "/expire" and "id" not in message:
            self.reply(202)
        elif self.path == "/expire" and method == "initialize":
            result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "odd-http", "version": "1"}}
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            self.reply(200, reply, [("Mcp-Session-Id", "s-1")])
        elif self.path == "/expire" and method == "tools/call":
            self.reply(404)
        elif self.path == "/expire":
            error = {"code": -32601, "message": "method not found"}
            self.reply(200, {"jsonrpc": "2.0", "id": message["id"], "error": error})
        else:
            self.reply(404)

    def base(self):
        return f"http://{self.headers.get('Host')}"

    def do_GET(self):
        base = self.base()
        well_known = "/.well-known/oauth-authorization-server/"
        if self.path.startswith("/prm/"):
            issuer = f"{base}/{self.path[len('/prm/'):]}"
            self.reply(200, {"resource": f"{base}/moved", "authorization_servers": [issuer]})
        elif self.path.startswith(well_known):
            issuer = f"{base}/{self.path[len(well_known):]}"
            self.reply(200, {"issuer": issuer, "token_endpoint": f"{issuer}/token"})
        else:
            self.reply(405)

    def do_DELETE(self):
        self.reply(200)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that closes or resets its connection first is what this server is for.
        pass


def main():
    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    sys.stdout.close()
    server.serve_forever()


main()
