package connect.registry;

import io.vertx.core.http.HttpHeaders;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Base64;
import java.util.HashSet;
import java.util.Optional;
import java.util.Set;
import javax.enterprise.context.ApplicationScoped;
import javax.enterprise.event.Observes;
import org.eclipse.microprofile.config.inject.ConfigProperty;

/**
 * Optional HTTP basic authentication in front of every registry endpoint but /health.
 *
 * <p>Why not Apicurio's or Quarkus's own: Apicurio 2's authentication needs an
 * OIDC server (its "basic auth" trades the credentials for a token at
 * Keycloak), and its authentication mechanism replaces Quarkus's, so Quarkus's
 * basic auth with embedded users cannot answer a challenge (the OIDC mechanism
 * it delegates to is not set up: requests hang). Quarkus 2's path permissions
 * are also fixed at build time. A Vert.x route ahead of all others needs
 * neither and is switched on at run time:
 *
 * <pre>connect.registry.basic-auth.users=name:password[,name:password...]</pre>
 *
 * Unset or empty: no authentication. Otherwise a request without matching
 * credentials gets 401 with a Basic challenge and the Confluent-style error body.
 */
@ApplicationScoped
public class BasicAuthFilter {

  @ConfigProperty(name = "connect.registry.basic-auth.users")
  Optional<String> users;

  void install(@Observes Router router) {
    Set<String> accepted = new HashSet<>();
    for (String pair : users.orElse("").split(",")) {
      if (pair.contains(":")) {
        accepted.add("Basic " + Base64.getEncoder().encodeToString(pair.trim().getBytes(StandardCharsets.UTF_8)));
      }
    }
    if (accepted.isEmpty()) {
      return;
    }
    router.route().order(Integer.MIN_VALUE).handler(ctx -> check(ctx, accepted));
  }

  private static void check(RoutingContext ctx, Set<String> accepted) {
    String given = ctx.request().getHeader(HttpHeaders.AUTHORIZATION);
    boolean ok = false;
    if (given != null) {
      byte[] g = given.trim().getBytes(StandardCharsets.UTF_8);
      for (String a : accepted) {
        ok |= MessageDigest.isEqual(g, a.getBytes(StandardCharsets.UTF_8));
      }
    }
    if (ok || ctx.normalizedPath().startsWith("/health")) {
      ctx.next();
      return;
    }
    ctx.response()
        .setStatusCode(401)
        .putHeader("WWW-Authenticate", "Basic realm=\"registry\"")
        .putHeader(HttpHeaders.CONTENT_TYPE, "application/json")
        .end("{\"error_code\":401,\"message\":\"Unauthorized\"}");
  }
}
