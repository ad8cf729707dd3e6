export default function App() { return null }
