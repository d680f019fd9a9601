package streamsql.hive;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.security.spec.KeySpec;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import javax.crypto.SecretKeyFactory;
import javax.crypto.spec.PBEKeySpec;
import javax.security.sasl.AuthenticationException;
import org.apache.hive.service.auth.PasswdAuthenticationProvider;

/**
 * HiveServer2's CUSTOM authentication against streamsql's users file (runtime.server_auth):
 * one "name:pbkdf2_sha256$iterations$salt$hash" line per user, salt and hash in base64. The
 * file is read again when it changes, so `streamsql user add` takes effect without a restart.
 * Each refusal is logged. HiveServer2 checks the password while it opens the connection,
 * before it knows the client's address (its TSetIpAddressProcessor sets that per request,
 * on a pooled thread that may still hold an earlier client's), so refusals are counted per
 * user name: after three failures in a row for one name, each further attempt at it waits
 * 1, 2, 4 ... (at most 30) seconds first, which slows a guesser down whatever its address.
 */
public class PasswordFile implements PasswdAuthenticationProvider {
  private static final Map<String, Integer> FAILURES = new ConcurrentHashMap<>();
  private static volatile Map<String, String> users = new HashMap<>();
  private static volatile long loaded = -1;

  @Override
  public void Authenticate(String user, String password) throws AuthenticationException {
    String client = user == null ? "" : user;
    int failures = FAILURES.getOrDefault(client, 0);
    long waited = failures >= 3 ? Math.min(30_000L, 1000L << Math.min(failures - 3, 5)) : 0;
    if (waited > 0) {
      try {
        Thread.sleep(waited);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    String stored = users().get(user == null ? "" : user);
    if (stored != null && password != null && matches(stored, password)) {
      FAILURES.remove(client);
      return;
    }
    FAILURES.merge(client, 1, Integer::sum);
    System.err.println("streamsql: refused HiveServer2 login of user '" + user + "'"
        + (stored == null ? " (no such user)" : " (wrong password)") + ", " + (failures + 1) + " in a row"
        + (waited > 0 ? ", after waiting " + waited / 1000 + " s" : ""));
    throw new AuthenticationException("Invalid user name or password");
  }

  private static Map<String, String> users() throws AuthenticationException {
    String file = System.getenv("STREAMSQL_USERS_FILE");
    if (file == null) {
      throw new AuthenticationException("The server has no users file (STREAMSQL_USERS_FILE)");
    }
    Path path = Paths.get(file);
    try {
      long modified = Files.getLastModifiedTime(path).toMillis() ^ Files.size(path);
      if (modified != loaded) {
        Map<String, String> read = new HashMap<>();
        List<String> lines = Files.readAllLines(path, StandardCharsets.UTF_8);
        for (String line : lines) {
          int colon = line.indexOf(':');
          if (colon > 0 && !line.startsWith("#")) {
            read.put(line.substring(0, colon), line.substring(colon + 1).trim());
          }
        }
        users = read;
        loaded = modified;
      }
    } catch (IOException e) {
      throw new AuthenticationException("The users file cannot be read: " + e.getMessage());
    }
    return users;
  }

  static boolean matches(String stored, String password) {
    String[] parts = stored.split("\\$");
    if (parts.length != 4 || !parts[0].equals("pbkdf2_sha256")) {
      return false;
    }
    try {
      int iterations = Integer.parseInt(parts[1]);
      byte[] salt = Base64.getDecoder().decode(parts[2]);
      byte[] expected = Base64.getDecoder().decode(parts[3]);
      KeySpec spec = new PBEKeySpec(password.toCharArray(), salt, iterations, expected.length * 8);
      byte[] actual = SecretKeyFactory.getInstance("PBKDF2WithHmacSHA256").generateSecret(spec).getEncoded();
      return MessageDigest.isEqual(expected, actual);
    } catch (Exception e) {
      return false;
    }
  }
}
