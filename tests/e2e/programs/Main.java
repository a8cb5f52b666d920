import java.io.*;
import java.nio.file.*;

public class Main {
	public static void main(String[] args) throws IOException {
		System.out.println("hello");
		System.out.println(String.join(" ", args));
		System.out.println(new BufferedReader(new InputStreamReader(System.in)).readLine());
		System.out.println(Files.readString(Path.of("in.txt")).trim());
		Files.writeString(Path.of("artifacts/out.txt"), "made by java\n");
	}
}
