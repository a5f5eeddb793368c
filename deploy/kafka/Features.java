// Prints the broker's finalized feature levels, one "name=level" per line, sorted
// (deploy/kafka.sh features). Run as a single-file program on the broker's jars.
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;

public class Features {
    public static void main(String[] args) throws Exception {
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]))) {
            new TreeMap<>(admin.describeFeatures().featureMetadata().get().finalizedFeatures())
                .forEach((name, range) -> System.out.println(name + "=" + range.maxVersionLevel()));
        }
    }
}
