// A real Java program nobody here wrote: the JDK's own compiler (com.sun.tools.javac, through
// javax.tools), compiling generated sources again and again in this JVM's main thread.
//
// Expected stacks: `JavacLoop.main` -> `com.sun.tools.javac.api.JavacTaskImpl.call` -> javac's
// parser, attribution and code generation (`com.sun.tools.javac.parser.JavacParser.*`,
// `com.sun.tools.javac.comp.Attr.*`, `com.sun.tools.javac.jvm.Gen.*`).
//
// Usage: java -cp DIR JavacLoop SECONDS [WARMUP_SECONDS] [eof] (see Control); prints "ready" after the warm-up and
// "compiled N" at the end.
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import javax.tools.JavaCompiler;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;

public final class JavacLoop {
    /// A source file with some arithmetic, generics and lambdas for javac to chew on.
    static String source(int n) {
        StringBuilder b = new StringBuilder();
        b.append("import java.util.*;\nimport java.util.function.*;\n");
        b.append("public class Gen").append(n).append(" {\n");
        for (int m = 0; m < 40; m++) {
            b.append("  static <T extends Comparable<T>> List<T> m").append(m)
                    .append("(List<T> in, Function<T, T> f) {\n")
                    .append("    List<T> out = new ArrayList<>();\n")
                    .append("    for (T t : in) { T u = f.apply(t); if (u.compareTo(t) > 0) out.add(u); else out.add(t); }\n")
                    .append("    out.sort(Comparator.naturalOrder());\n")
                    .append("    int x = ").append(m).append(" * 31 + in.size() % 7 - (in.isEmpty() ? 1 : 2);\n")
                    .append("    Map<String, Integer> counts = new HashMap<>();\n")
                    .append("    for (T t : out) counts.merge(String.valueOf(t), x, Integer::sum);\n")
                    .append("    return out;\n  }\n");
        }
        b.append("}\n");
        return b.toString();
    }

    public static void main(String[] args) throws IOException {
        double seconds = Double.parseDouble(args[0]);
        double warmup = args.length > 1 && !args[1].equals("eof") ? Double.parseDouble(args[1]) : 0;
        Control.watch(args);
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        Path dir = Files.createTempDirectory("javacloop");
        List<Path> files = new ArrayList<>();
        for (int n = 0; n < 8; n++) {
            Path p = dir.resolve("Gen" + n + ".java");
            Files.writeString(p, source(n));
            files.add(p);
        }
        Path out = Files.createDirectories(dir.resolve("out"));
        long compiled = 0;
        boolean ready = false;
        long warmEnd = System.nanoTime() + (long) (warmup * 1e9);
        long end = warmEnd + (long) (seconds * 1e9);
        try (StandardJavaFileManager fm = javac.getStandardFileManager(null, null, null)) {
            while (!Control.over(end)) {
                if (!ready && System.nanoTime() >= warmEnd) {
                    System.out.println("ready");
                    System.out.flush();
                    ready = true;
                }
                var units = fm.getJavaFileObjectsFromPaths(files);
                var task = javac.getTask(null, fm, null, List.of("-d", out.toString(), "-g"), null, units);
                if (!task.call()) {
                    throw new IllegalStateException("javac failed");
                }
                compiled += files.size();
            }
        }
        System.out.println("compiled " + compiled);
    }
}
